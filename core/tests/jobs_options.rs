//! 04-jobs-rules.md §11: the Jobs options, their defaults, floors and aggregated validation.

use std::collections::BTreeMap;
use std::time::Duration;

use nodewright_core::Options;
use nodewright_core::jobs::builder::deadline_seconds;
use nodewright_crds::Package;
use nodewright_crds::duration::GoDuration;

fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn r11_defaults_of_the_option_table() {
    let o = Options::default();
    assert_eq!(o.job_ttl_succeeded, Duration::from_secs(3600));
    assert_eq!(o.job_ttl_failed, Duration::from_secs(86400));
    assert_eq!(o.job_stage_timeout, Duration::from_secs(3600));
    assert_eq!(o.job_backoff_limit, 3);
    assert_eq!(o.job_image_pull_grace, Duration::from_secs(300));
}

#[test]
fn r11_1_values_are_go_durations() {
    let o = Options::from_env(&env(&[
        ("JOB_TTL_SUCCEEDED", "1h30m"),
        ("JOB_TTL_FAILED", "90m"),
        ("JOB_STAGE_TIMEOUT", "1500ms"),
        ("JOB_IMAGE_PULL_GRACE", "2m30s"),
    ]))
    .unwrap();
    assert_eq!(o.job_ttl_succeeded, Duration::from_secs(5400));
    assert_eq!(o.job_ttl_failed, Duration::from_secs(5400));
    assert_eq!(o.job_stage_timeout, Duration::from_millis(1500));
    assert_eq!(o.job_image_pull_grace, Duration::from_secs(150));
    assert!(Options::from_env(&env(&[("JOB_STAGE_TIMEOUT", "ten minutes")])).is_err());
}

#[test]
fn r11_2_sub_minute_ttls_including_zero_fail_startup() {
    for (key, value) in [
        ("JOB_TTL_SUCCEEDED", "59s"),
        ("JOB_TTL_SUCCEEDED", "0"),
        ("JOB_TTL_FAILED", "30s"),
    ] {
        let err = Options::from_env(&env(&[(key, value)])).unwrap_err();
        assert!(err.to_string().contains(key), "{err}");
    }
    assert!(
        Options::from_env(&env(&[
            ("JOB_TTL_SUCCEEDED", "1m"),
            ("JOB_TTL_FAILED", "1m")
        ]))
        .is_ok()
    );
}

#[test]
fn r11_3_package_stage_timeout_overrides_zero_disables_subsecond_rounds_up() {
    let o = Options::default();
    let mut p = Package::default();
    assert_eq!(deadline_seconds(&p, &o), Some(3600));
    p.stage_timeout = Some(GoDuration::new("0s"));
    assert_eq!(deadline_seconds(&p, &o), None);
    p.stage_timeout = Some(GoDuration::new("100ms"));
    assert_eq!(deadline_seconds(&p, &o), Some(1));
}

#[test]
fn r11_4_zero_stage_timeout_means_as_long_as_it_takes() {
    let o = Options::from_env(&env(&[("JOB_STAGE_TIMEOUT", "0")])).unwrap();
    assert_eq!(deadline_seconds(&Package::default(), &o), None);
    assert!(Options::from_env(&env(&[("JOB_STAGE_TIMEOUT", "-1s")])).is_err());
    assert!(Options::from_env(&env(&[("JOB_BACKOFF_LIMIT", "-1")])).is_err());
    assert_eq!(
        Options::from_env(&env(&[("JOB_BACKOFF_LIMIT", "0")]))
            .unwrap()
            .job_backoff_limit,
        0
    );
}

#[test]
fn r11_5_invalid_options_are_reported_together() {
    let err = Options::from_env(&env(&[
        ("JOB_TTL_SUCCEEDED", "1s"),
        ("JOB_TTL_FAILED", "1s"),
        ("JOB_STAGE_TIMEOUT", "bogus"),
        ("JOB_BACKOFF_LIMIT", "x"),
        ("JOB_IMAGE_PULL_GRACE", "-5m"),
    ]))
    .unwrap_err();
    assert_eq!(err.0.len(), 5, "{err}");
}

#[test]
fn r11_6_namespace_reapply_on_reboot_and_default_interval() {
    let o = Options::from_env(&env(&[
        ("NAMESPACE", "ops"),
        ("REAPPLY_ON_REBOOT", "true"),
        ("DEFAULT_INTERVAL", "5m"),
    ]))
    .unwrap();
    assert_eq!(o.namespace, "ops");
    assert!(o.reapply_on_reboot);
    assert_eq!(o.default_interval, Duration::from_secs(300));
}
