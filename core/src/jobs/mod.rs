//! The Jobs execution model (03-executor.md, 04-jobs-rules.md): executor builders, outcome
//! classification and finished-Job rules.
