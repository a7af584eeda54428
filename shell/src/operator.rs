//! Process wiring of `nodewright-operator`: options, client, caches, leader election, pass loop,
//! webhooks, probes, metrics and graceful shutdown on SIGTERM.

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use axum_server::tls_rustls::RustlsConfig;
use nodewright_core::Options;
use tokio::sync::{Mutex, watch};
use tracing::{error, info, warn};

use crate::cache::{self, Trigger};
use crate::client::{self, Purpose, USER_AGENT_ENV};
use crate::health::{self, Contact, PASS_STUCK_AFTER_ENV};
use crate::interpret::{self, CONCURRENCY_ENV, EventRecorder, Interpreter};
use crate::leader::{self, Fence, LeaderConfig};
use crate::metrics::Metrics;
use crate::metrics_auth::MetricsAuth;
use crate::runner::{PassClock, Runner};
use crate::server::{self, Health, WEBHOOK_PORT};
use crate::trace::TraceRecorder;
use crate::webhook::admission::ApiLookups;
use crate::webhook::bootstrap::{CertManager, CertSettings};
use crate::webhook::{cert, tls};
use crate::{logging, version};

/// How often the replica re-reads fixed webhook certificate files (`WEBHOOK_CERT_DIR`).
pub const CERT_CHECK_PERIOD: Duration = Duration::from_secs(30);

/// Entry point: `--version`/`--help` print and exit 0; otherwise exit 0 after a clean shutdown,
/// 1 on start-up errors, 2 on invalid options or arguments. Losing leadership does not end the
/// process: it stops its passes and campaigns again.
pub fn main() -> ExitCode {
    if let Some(code) = crate::args::handle(std::env::args_os()) {
        return code;
    }
    let env: BTreeMap<String, String> = std::env::vars().collect();
    let options = match Options::from_env(&env) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("nodewright-operator: {e}");
            return ExitCode::from(2);
        }
    };
    let addrs = match (
        server::parse_addr(&options.metrics_addr),
        server::parse_addr(&options.probe_addr),
    ) {
        (Ok(m), Ok(p)) => (m, p),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("nodewright-operator: invalid operator options: {e}");
            return ExitCode::from(2);
        }
    };
    logging::init(&options.log_encoder, &options.log_level);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            error!(error = %e, "cannot start the async runtime");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(options, env, addrs)) {
        Ok(code) => code,
        Err(e) => {
            error!(error = %e, "operator failed");
            ExitCode::FAILURE
        }
    }
}

fn identity(env: &BTreeMap<String, String>) -> String {
    let host = env
        .get("POD_NAME")
        .or_else(|| env.get("HOSTNAME"))
        .cloned()
        .unwrap_or_else(|| "nodewright-operator".into());
    let nanos = jiff::Timestamp::now().as_nanosecond() as u64;
    format!("{host}_{:x}{:x}", std::process::id(), nanos & 0xffff_ffff)
}

async fn run(
    options: Options,
    env: BTreeMap<String, String>,
    (metrics_addr, probe_addr): (Option<std::net::SocketAddr>, Option<std::net::SocketAddr>),
) -> anyhow::Result<ExitCode> {
    let stuck_after = health::stuck_after(env.get(PASS_STUCK_AFTER_ENV).map(String::as_str))
        .map_err(|e| anyhow::anyhow!("invalid operator options: {e}"))?;
    let effect_concurrency = interpret::concurrency(env.get(CONCURRENCY_ENV).map(String::as_str))
        .map_err(|e| anyhow::anyhow!("invalid operator options: {e}"))?;
    let identity = identity(&env);
    let agent = client::user_agent(env.get(USER_AGENT_ENV).map(String::as_str), &identity);
    // Plain requests (bounded), watches (long reads), and the reconcile writer (fenced by the
    // lease when leader election is on).
    let client = client::build(Purpose::Request, &agent, None).await?;
    let watch_client = client::build(Purpose::Watch, &agent, None).await?;
    let fence = if options.leader_election {
        Fence::closed()
    } else {
        Fence::always_open()
    };
    let writer = client::build(
        Purpose::Request,
        &agent,
        options.leader_election.then(|| fence.clone()),
    )
    .await?;
    let cluster = version::check(&client).await;
    info!(namespace = %options.namespace, identity = %identity, user_agent = %agent,
          leader_election = options.leader_election, webhooks = options.enable_webhooks,
          pass_stuck_after_s = stuck_after.as_secs(), effect_concurrency,
          "starting nodewright-operator");

    let (shutdown_tx, shutdown) = watch::channel(false);
    tokio::spawn(wait_for_signal(shutdown_tx));

    let metrics = Arc::new(Metrics::new(options.publish_legacy_metrics));
    let trigger = Trigger::default();
    let (caches, _watch_tasks) = cache::start(&watch_client, &options.namespace, &trigger);
    let (leading_tx, leading) = watch::channel(false);
    let pass_clock = PassClock::default();
    let contact = Contact::default();
    tokio::spawn(health::track_contact(
        client.clone(),
        contact.clone(),
        shutdown.clone(),
    ));
    let mut health = Health {
        pass: pass_clock.clone(),
        stuck_after,
        contact,
        leading: options.leader_election.then(|| leading.clone()),
        ..Health::default()
    };
    let (synced_tx, synced) = watch::channel(false);
    {
        // One waiter only: the stores' readiness futures do not reliably wake several waiters.
        let (caches, flag) = (caches.clone(), health.caches_synced.clone());
        tokio::spawn(async move {
            caches.wait_ready().await;
            flag.store(true, Ordering::Relaxed);
            let _ = synced_tx.send(true);
            std::future::pending::<()>().await;
        });
    }

    if options.enable_webhooks {
        let (crt, key) = cert::placeholder()?;
        let tls_config = RustlsConfig::from_config(tls::server_config(&crt, &key)?);
        match env.get("WEBHOOK_CERT_DIR").filter(|d| !d.is_empty()) {
            Some(dir) => {
                // Local development: serve fixed files, no Secret and no CA injection.
                let files = crate::webhook::files::CertFiles::new(dir, tls_config.clone());
                health.webhook_files = Some(files.clone());
                tokio::spawn(files.run(CERT_CHECK_PERIOD, shutdown.clone()));
            }
            None => {
                let settings = CertSettings {
                    service_name: options.webhook_service_name.clone(),
                    url: options.webhook_url.clone(),
                    validity: options.webhook_cert_validity,
                    rotate_before: options.webhook_cert_rotate_before,
                };
                let manager = CertManager::new(
                    client.clone(),
                    &options.namespace,
                    &options.webhook_secret_name,
                    settings,
                    tls_config.clone(),
                );
                health.webhook = Some(manager.clone());
                let period = manager.check_period();
                tokio::spawn(manager.run(period, shutdown.clone()));
            }
        }
        let port = env
            .get("WEBHOOK_PORT")
            .and_then(|p| p.parse().ok())
            .unwrap_or(WEBHOOK_PORT);
        let addr = std::net::SocketAddr::from(([0, 0, 0, 0], port));
        let router = server::webhook_router(ApiLookups(client.clone()));
        tokio::spawn(server::serve_tls(
            "webhook",
            addr,
            router,
            tls_config,
            shutdown.clone(),
        ));
    }
    if let Some(addr) = probe_addr {
        tokio::spawn(server::serve_http(
            "probes",
            addr,
            server::probe_router(health.clone()),
            shutdown.clone(),
        ));
    }
    if let Some(addr) = metrics_addr {
        serve_metrics(&client, &options, addr, metrics.clone(), shutdown.clone())?;
    }

    let (release_tx, release) = watch::channel(false);
    let leader_task = if options.leader_election {
        let config = LeaderConfig::new(&options.namespace, &identity);
        let out = leader::Outputs {
            leading: leading_tx,
            fence,
        };
        Some(tokio::spawn(leader::run(
            client.clone(),
            config,
            out,
            release,
        )))
    } else {
        let _ = leading_tx.send(true);
        std::mem::forget(leading_tx);
        None
    };
    {
        let (mut leading, gauge) = (leading.clone(), metrics.leader.clone());
        tokio::spawn(async move {
            loop {
                gauge.set(i64::from(*leading.borrow()));
                if leading.changed().await.is_err() {
                    gauge.set(0);
                    return;
                }
            }
        });
    }

    let trace = match env.get("NODEWRIGHT_TRACE").filter(|p| !p.is_empty()) {
        Some(path) => {
            info!(path = %path, "recording a trace");
            let max_bytes = match env.get("NODEWRIGHT_TRACE_MAX_BYTES") {
                Some(v) => v.parse::<u64>().map_err(|e| {
                    anyhow::anyhow!("NODEWRIGHT_TRACE_MAX_BYTES={v:?}: not a byte count: {e}")
                })?,
                None => crate::trace::DEFAULT_TRACE_MAX_BYTES,
            };
            let recorder = TraceRecorder::create(
                std::path::Path::new(path),
                &options.namespace,
                &env,
                max_bytes,
            )?;
            Some(Arc::new(Mutex::new(recorder)))
        }
        None => None,
    };
    let events = EventRecorder::new(&identity);
    let interpreter = Interpreter::new(writer, &options.namespace, events)
        .with_node_cache(caches.nodes.clone())
        .with_concurrency(effect_concurrency);
    let runner = Runner {
        caches,
        trigger,
        interpreter,
        options,
        metrics,
        cluster,
        trace,
        synced,
        parsed: Default::default(),
        pass_clock,
    };
    runner.run(leading.clone(), shutdown.clone()).await;

    // Passes have stopped (the one in flight was cancelled): only now may the lease go.
    let _ = release_tx.send(true);
    if let Some(task) = leader_task {
        let _ = tokio::time::timeout(Duration::from_secs(5), task).await;
    }
    if *shutdown.borrow() {
        info!("shutting down");
        tokio::time::sleep(Duration::from_millis(200)).await;
        return Ok(ExitCode::SUCCESS);
    }
    warn!("the pass loop ended without a shutdown request");
    Ok(ExitCode::FAILURE)
}

/// Plain HTTP metrics, or HTTPS with TokenReview/SubjectAccessReview checks (`METRICS_SECURE`).
fn serve_metrics(
    client: &kube::Client,
    options: &Options,
    addr: std::net::SocketAddr,
    metrics: Arc<Metrics>,
    shutdown: watch::Receiver<bool>,
) -> anyhow::Result<()> {
    if !options.metrics_secure {
        let router = server::metrics_router(metrics);
        tokio::spawn(server::serve_http("metrics", addr, router, shutdown));
        return Ok(());
    }
    let (crt, key) = cert::self_signed_serving(&["localhost".to_string()])?;
    let tls_config = RustlsConfig::from_config(tls::server_config(&crt, &key)?);
    let auth = MetricsAuth::new(client.clone());
    let router = server::secure_metrics_router(metrics, auth);
    tokio::spawn(server::serve_tls(
        "metrics", addr, router, tls_config, shutdown,
    ));
    Ok(())
}

async fn wait_for_signal(tx: watch::Sender<bool>) {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => info!("SIGTERM received"),
                    _ = tokio::signal::ctrl_c() => info!("SIGINT received"),
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
    let _ = tx.send(true);
}
