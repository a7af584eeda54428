pub mod chart_values;
