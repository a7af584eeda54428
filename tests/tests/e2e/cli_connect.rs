//! The plugin's `version` command and kubectl's connection flags against the local apiserver:
//! each flag is shown to change whom or where the plugin talks to (docs/cli.md).

use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, ensure};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use serde_json::json;

use crate::harness::{client, namespace};

/// Output of one plugin run.
pub struct Run {
    /// Exit status was 0.
    pub ok: bool,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
    /// Wall time.
    pub took: Duration,
}

/// Runs `kubectl-nodewright` (built by the driver, `NODEWRIGHT_E2E_CLI_BIN`) with `args`.
pub async fn plugin(args: &[&str]) -> Result<Run> {
    let bin = std::env::var("NODEWRIGHT_E2E_CLI_BIN")
        .context("NODEWRIGHT_E2E_CLI_BIN unset (run through tests/e2e/run.sh)")?;
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    let started = Instant::now();
    let out =
        tokio::task::spawn_blocking(move || std::process::Command::new(bin).args(&args).output())
            .await??;
    Ok(Run {
        ok: out.status.success(),
        stdout: String::from_utf8_lossy(&out.stdout).into(),
        stderr: String::from_utf8_lossy(&out.stderr).into(),
        took: started.elapsed(),
    })
}

/// Starts `kubectl-nodewright` with `args` for a command that keeps running (`--watch`, `-f`):
/// the child, and its stdout lines as they come.
pub fn spawn_plugin(
    args: &[&str],
) -> Result<(std::process::Child, std::sync::mpsc::Receiver<String>)> {
    use std::io::BufRead;
    let bin = std::env::var("NODEWRIGHT_E2E_CLI_BIN")
        .context("NODEWRIGHT_E2E_CLI_BIN unset (run through tests/e2e/run.sh)")?;
    let mut child = std::process::Command::new(bin)
        .args(args)
        .stdout(std::process::Stdio::piped())
        .spawn()?;
    let stdout = child.stdout.take().context("stdout")?;
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    Ok((child, rx))
}

/// Lines received until `done` holds for them (30 s at most).
pub fn lines_until(
    rx: &std::sync::mpsc::Receiver<String>,
    what: &str,
    done: impl Fn(&[String]) -> bool,
) -> Result<Vec<String>> {
    let mut lines = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if let Ok(l) = rx.recv_timeout(Duration::from_millis(500)) {
            lines.push(l);
            if done(&lines) {
                return Ok(lines);
            }
        }
    }
    anyhow::bail!("no {what} in the output: {lines:#?}")
}

fn pki(file: &str) -> Result<String> {
    let dir = std::env::var("NODEWRIGHT_E2E_PKI").context("NODEWRIGHT_E2E_PKI unset")?;
    Ok(format!("{dir}/{file}"))
}

fn server() -> Result<String> {
    let kubeconfig = std::env::var("KUBECONFIG").context("KUBECONFIG unset")?;
    let text = std::fs::read_to_string(&kubeconfig)?;
    let line = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("server: "))
        .context("no server in the kubeconfig")?;
    Ok(line.trim().to_string())
}

/// A TCP listener that accepts connections and never answers (a hung apiserver).
fn black_hole() -> Result<(std::net::TcpListener, String)> {
    let l = std::net::TcpListener::bind("127.0.0.1:0")?;
    let url = format!("https://{}", l.local_addr()?);
    Ok((l, url))
}

async fn create_operator_deployment(name: &str, version: &str) -> Result<()> {
    let api: Api<Deployment> = Api::namespaced(client().await?, &namespace());
    let d: Deployment = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {
            "app.kubernetes.io/name": "nodewright", "app.kubernetes.io/version": version}},
        "spec": {"replicas": 0, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "manager", "image": format!("example.test/nodewright/operator:v{version}")}]}}}
    }))?;
    api.create(&PostParams::default(), &d).await?;
    Ok(())
}

async fn delete_deployment(name: &str) -> Result<()> {
    let api: Api<Deployment> = Api::namespaced(client().await?, &namespace());
    let _ = api.delete(name, &DeleteParams::default()).await;
    Ok(())
}

/// `version` prints the plugin version, the operator Deployment's version label when one exists,
/// "unknown (...)" when none does, nothing of the operator with `--client-only`, and gives up
/// after `--timeout` on a server that never answers.
#[tokio::test]
#[ignore = "e2e: needs tests/e2e/run.sh"]
async fn cli_version_reports_plugin_and_operator() -> Result<()> {
    let ns = namespace();
    let client_only = plugin(&["version", "--client-only"]).await?;
    ensure!(client_only.ok, "{}", client_only.stderr);
    ensure!(
        client_only.stdout == format!("NodeWright plugin:\t{}\n", env!("CARGO_PKG_VERSION")),
        "{:?}",
        client_only.stdout
    );
    let none = plugin(&["version", "-n", &ns]).await?;
    ensure!(
        none.stdout
            .contains("NodeWright operator:\tunknown (no NodeWright operator Deployment"),
        "{:?}",
        none.stdout
    );
    let name = "nodewright-e2e-version";
    create_operator_deployment(name, "9.8.7").await?;
    let found = plugin(&["version", "-n", &ns]).await;
    let json = plugin(&["version", "-n", &ns, "-o", "json"]).await;
    delete_deployment(name).await?;
    let (found, json) = (found?, json?);
    ensure!(
        found.stdout.contains("NodeWright operator:\t9.8.7\n"),
        "{:?}",
        found.stdout
    );
    let v: serde_json::Value = serde_json::from_str(&json.stdout)?;
    ensure!(v["operator"] == "9.8.7", "{v}");
    let (_hole, url) = black_hole()?;
    let hung = plugin(&[
        "version",
        "--server",
        &url,
        "--insecure-skip-tls-verify",
        "--timeout",
        "1s",
    ])
    .await?;
    ensure!(
        hung.stdout.contains("unknown (no answer within 1s)") && hung.took < Duration::from_secs(8),
        "{:?} after {:?}",
        hung.stdout,
        hung.took
    );
    Ok(())
}

async fn service_account_token(name: &str) -> Result<String> {
    let api: Api<ServiceAccount> = Api::namespaced(client().await?, &namespace());
    let sa: ServiceAccount = serde_json::from_value(json!({"metadata": {"name": name}}))?;
    match api.create(&PostParams::default(), &sa).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 409 => {}
        Err(e) => return Err(e.into()),
    }
    let request: TokenRequest =
        serde_json::from_value(json!({"spec": {"audiences": [], "expirationSeconds": 600}}))?;
    let answer: TokenRequest = api
        .create_subresource("token", name, &PostParams::default(), &request)
        .await?;
    answer
        .status
        .and_then(|s| s.token)
        .context("TokenRequest answered without a token")
}

/// Every standard connection flag against the local apiserver: `--server` with
/// `--certificate-authority` (right CA works, wrong CA fails), `--insecure-skip-tls-verify`,
/// `--token` (the service account's identity reaches the apiserver), `--as`/`--as-group`
/// (impersonation), `--user`/`--cluster` (other kubeconfig entries) and `--request-timeout`
/// (a hung server fails fast).
#[tokio::test]
#[ignore = "e2e: needs tests/e2e/run.sh"]
async fn cli_connection_flags_reach_the_local_apiserver() -> Result<()> {
    let ns = namespace();
    let srv = server()?;
    let list = ["node", "list", "-n", ns.as_str(), "--nodewright", "none"];
    let with = |extra: &[&str]| -> Vec<String> {
        extra
            .iter()
            .chain(list.iter())
            .map(|s| s.to_string())
            .collect()
    };
    let run = |args: Vec<String>| async move {
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        plugin(&refs).await
    };
    // --server + --certificate-authority: the right CA verifies, another certificate does not.
    let ca = pki("ca.crt")?;
    let good = run(with(&["--server", &srv, "--certificate-authority", &ca])).await?;
    ensure!(good.ok, "right CA: {}", good.stderr);
    let wrong = pki("webhook.crt")?;
    let bad = run(with(&["--server", &srv, "--certificate-authority", &wrong])).await?;
    ensure!(
        !bad.ok && bad.stderr.to_lowercase().contains("cert"),
        "wrong CA: {}",
        bad.stderr
    );
    let insecure = run(with(&[
        "--server",
        &srv,
        "--certificate-authority",
        &wrong,
        "--insecure-skip-tls-verify",
    ]))
    .await?;
    ensure!(
        !insecure.ok && insecure.stderr.contains("exclude each other"),
        "{}",
        insecure.stderr
    );
    let insecure = run(with(&["--insecure-skip-tls-verify"])).await?;
    ensure!(insecure.ok, "insecure: {}", insecure.stderr);
    // --token: the apiserver sees the service account (which may not list nodes).
    let token = service_account_token("nodewright-e2e-cli").await?;
    let as_sa = run(with(&["--token", &token])).await?;
    ensure!(
        !as_sa.ok
            && as_sa
                .stderr
                .contains(&format!("system:serviceaccount:{ns}:nodewright-e2e-cli")),
        "token: {}",
        as_sa.stderr
    );
    // --as / --as-group: impersonation by the admin user.
    let alice = run(with(&["--as", "alice"])).await?;
    ensure!(
        !alice.ok && alice.stderr.contains("\"alice\""),
        "as: {}",
        alice.stderr
    );
    let admin = run(with(&["--as", "alice", "--as-group", "system:masters"])).await?;
    ensure!(admin.ok, "as-group: {}", admin.stderr);
    // --user / --cluster: other entries of a kubeconfig.
    let (_hole, hole_url) = black_hole()?;
    let kc_path = extended_kubeconfig(&token, &hole_url)?;
    let kc = kc_path.to_string_lossy().to_string();
    let sa_user = run(with(&["--kubeconfig", &kc, "--user", "sa"])).await?;
    ensure!(
        !sa_user.ok && sa_user.stderr.contains("system:serviceaccount"),
        "user: {}",
        sa_user.stderr
    );
    let hung = run(with(&[
        "--kubeconfig",
        &kc,
        "--cluster",
        "hung",
        "--insecure-skip-tls-verify",
        "--request-timeout",
        "1s",
    ]))
    .await?;
    ensure!(
        !hung.ok && hung.took < Duration::from_secs(8),
        "cluster + request-timeout: {} after {:?}",
        hung.stderr,
        hung.took
    );
    let unknown = run(with(&["--kubeconfig", &kc, "--cluster", "nope"])).await?;
    ensure!(
        !unknown.ok && unknown.stderr.contains("\"nope\" not found"),
        "{}",
        unknown.stderr
    );
    let bad_timeout = run(with(&["--request-timeout", "soon"])).await?;
    ensure!(
        !bad_timeout.ok && bad_timeout.stderr.contains("invalid request timeout"),
        "{}",
        bad_timeout.stderr
    );
    let _ = std::fs::remove_file(kc_path);
    Ok(())
}

/// The driver's kubeconfig plus a `sa` user (the token) and a `hung` cluster (a black hole).
fn extended_kubeconfig(token: &str, hung: &str) -> Result<std::path::PathBuf> {
    let base = std::fs::read_to_string(std::env::var("KUBECONFIG")?)?;
    let mut text = String::new();
    for line in base.lines() {
        text.push_str(line);
        text.push('\n');
        if line == "clusters:" {
            text.push_str(&format!("- name: hung\n  cluster:\n    server: {hung}\n"));
        }
        if line == "users:" {
            text.push_str(&format!("- name: sa\n  user:\n    token: {token}\n"));
        }
    }
    let path =
        std::env::temp_dir().join(format!("nodewright-e2e-kubeconfig-{}", std::process::id()));
    std::fs::write(&path, text)?;
    Ok(path)
}
