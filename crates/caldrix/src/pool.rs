//! `caldrix pool`: the daemon (bind after every `--load` has loaded), `pool stop`, `pool status`.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use caldrix_client::Client;
use caldrix_pool::{MemberConfig, Pool, PoolConfig};
use caldrix_proto::{FrameFormat, Render};

/// `$XDG_RUNTIME_DIR/caldrix/pool.sock`, else `/tmp/caldrix-<uid>/pool.sock`.
pub fn default_socket() -> PathBuf {
    let runtime_dir = std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from);
    caldrix_proto::default_socket(runtime_dir.as_deref())
}

const USAGE: &str = "usage:
  caldrix pool [--socket PATH] [--frames cbor|json] [--max-connections N] [--idle-timeout SECS]
               [--context-budget BYTES] --load MODEL [--alias NAME] [--ctx N] [--threads N]
               [--batch N] [--gpu-layers N|auto] [--max-batch N [--fit-max-batch]]
               [--fast-forward] [--draft] [--load MODEL ...]
               [--http ADDR [--api-key-env VAR] [--http-clamp-max-tokens]]
  --gpu-layers: layers offloaded to a GPU; auto (the default) offloads what fits the device's
                free memory, none on a build or machine without a usable GPU backend
  --http: the OpenAI- and Anthropic-compatible HTTP front (off by default); a bare port
          listens on 127.0.0.1; --api-key-env before the first --load names the variable
          whose value every HTTP request must carry as `Authorization: Bearer` or `x-api-key`
  a remote member: --load openai:URL#MODEL [--tokenizer MODEL] [--api-key-env VAR]
                   [--render pool|engine]
  caldrix pool stop [--socket PATH]
  caldrix pool status [--socket PATH] [--json]";

struct ServeArgs {
    socket: PathBuf,
    frames: FrameFormat,
    max_connections: u32,
    idle_timeout: u64,
    context_budget: Option<u64>,
    members: Vec<MemberConfig>,
    http: Option<HttpArgs>,
}

/// `--http ADDR` and what goes with it.
#[derive(Default)]
struct HttpArgs {
    addr: String,
    /// The variable named by a pool-level `--api-key-env`.
    key_env: Option<String>,
    clamp_max_tokens: bool,
}

pub fn run(args: &[String]) -> anyhow::Result<()> {
    match args.first().map(String::as_str) {
        Some("stop") => {
            let socket = socket_only(&args[1..], false)?.0;
            runtime()?.block_on(async {
                let mut client = connect(&socket, FrameFormat::Cbor).await?;
                client.stop().await?;
                println!("the pool at {} is stopping", socket.display());
                anyhow::Ok(())
            })
        }
        Some("status") => {
            let (socket, json) = socket_only(&args[1..], true)?;
            runtime()?.block_on(async {
                let mut client = connect(&socket, FrameFormat::Cbor).await?;
                let status = client.status().await?;
                if json {
                    println!("{}", serde_json::to_string_pretty(&status)?);
                } else {
                    print_status(&socket, &status);
                }
                anyhow::Ok(())
            })
        }
        Some("--help" | "-h") => {
            println!("{USAGE}");
            Ok(())
        }
        _ => serve(parse_serve(args)?),
    }
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?)
}

/// A client of a running pool: its frame format is tried as given, then the other one.
async fn connect(socket: &Path, frames: FrameFormat) -> anyhow::Result<Client> {
    let first = Client::connect(socket, frames, "caldrix-cli").await;
    match first {
        Ok(c) => Ok(c),
        Err(caldrix_client::ClientError::Connect { .. }) => {
            bail!("no pool is serving on {}", socket.display())
        }
        Err(e @ caldrix_client::ClientError::Untrusted(_)) => Err(e.into()),
        Err(_) => {
            let other =
                if frames == FrameFormat::Cbor { FrameFormat::Json } else { FrameFormat::Cbor };
            Ok(Client::connect(socket, other, "caldrix-cli").await?)
        }
    }
}

fn socket_only(args: &[String], json_allowed: bool) -> anyhow::Result<(PathBuf, bool)> {
    let mut socket = default_socket();
    let mut json = false;
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--socket" => socket = it.next().context("--socket needs a path")?.into(),
            "--json" if json_allowed => json = true,
            other => bail!("unknown argument `{other}`\n{USAGE}"),
        }
    }
    Ok((socket, json))
}

fn number<T: std::str::FromStr>(flag: &str, value: Option<&String>) -> anyhow::Result<T> {
    let value = value.with_context(|| format!("{flag} needs a value"))?;
    value.parse().map_err(|_| anyhow::anyhow!("{flag}: `{value}` is not a valid number"))
}

/// `--gpu-layers N|auto`: `None` is auto (`caldrix_engine::device::GpuLayers`).
pub fn gpu_layers(flag: &str, value: Option<&String>) -> anyhow::Result<Option<u32>> {
    match value {
        Some(v) if v == "auto" => Ok(None),
        other => {
            let n = number::<u32>(flag, other)
                .map_err(|_| anyhow::anyhow!("{flag} takes a number of layers or `auto`"))?;
            Ok(Some(n))
        }
    }
}

/// Bytes, with an optional K/M/G (binary) suffix.
fn bytes(flag: &str, value: Option<&String>) -> anyhow::Result<u64> {
    let value = value.with_context(|| format!("{flag} needs a value"))?;
    let (digits, unit) = match value.trim_end_matches(['i', 'B']).char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => (&value[..i], c.to_ascii_uppercase()),
        _ => (value.as_str(), ' '),
    };
    let n: u64 = digits.parse().map_err(|_| anyhow::anyhow!("{flag}: `{value}` is not a size"))?;
    let shift = match unit {
        ' ' => 0,
        'K' => 10,
        'M' => 20,
        'G' => 30,
        _ => bail!("{flag}: unknown unit in `{value}` (K, M, G)"),
    };
    Ok(n << shift)
}

/// `--max-batch N`, refused by name outside 1 to `MAX_BATCH`.
pub fn max_batch(n: u32) -> anyhow::Result<u32> {
    let max = caldrix_proto::MAX_BATCH;
    if !(1..=max).contains(&n) {
        bail!("--max-batch {n} is out of range: a member decodes 1 to {max} generations together");
    }
    Ok(n)
}

fn parse_serve(args: &[String]) -> anyhow::Result<ServeArgs> {
    let mut out = ServeArgs {
        socket: default_socket(),
        frames: FrameFormat::Cbor,
        max_connections: 4,
        idle_timeout: 1800,
        context_budget: None,
        members: Vec::new(),
        http: None,
    };
    let mut http = HttpArgs::default();
    // Per member: the reference and the remote settings, resolved once all are read.
    type Source = (String, Option<String>, Option<String>, Option<Render>);
    let mut sources: Vec<Source> = Vec::new();
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let member = out.members.last_mut();
        match (arg.as_str(), member) {
            ("--socket", _) => out.socket = it.next().context("--socket needs a path")?.into(),
            ("--frames", _) => {
                out.frames = it
                    .next()
                    .context("--frames needs cbor or json")?
                    .parse()
                    .map_err(anyhow::Error::msg)?
            }
            ("--max-connections", _) => out.max_connections = number(arg, it.next())?,
            ("--idle-timeout", _) => out.idle_timeout = number(arg, it.next())?,
            ("--context-budget", _) => out.context_budget = Some(bytes(arg, it.next())?),
            ("--http", _) => {
                http.addr = it.next().context("--http needs an address or a port")?.clone()
            }
            ("--http-clamp-max-tokens", _) => http.clamp_max_tokens = true,
            ("--api-key-env", None) => {
                http.key_env =
                    Some(it.next().context("--api-key-env needs a variable's name")?.clone())
            }
            ("--load", _) => {
                let reference = it.next().context("--load needs a model")?;
                sources.push((reference.clone(), None, None, None));
                let n = out.members.len();
                let alias = if n == 0 { "main".into() } else { format!("member{}", n + 1) };
                out.members.push(MemberConfig::new(alias, reference.clone(), PathBuf::new()));
            }
            ("--alias", Some(m)) => m.alias = it.next().context("--alias needs a name")?.clone(),
            ("--ctx", Some(m)) => m.window = Some(number(arg, it.next())?),
            ("--threads", Some(m)) => m.threads = Some(number(arg, it.next())?),
            ("--batch", Some(m)) => m.batch = Some(number(arg, it.next())?),
            ("--gpu-layers", Some(m)) => m.gpu_layers = gpu_layers(arg, it.next())?,
            ("--max-batch", Some(m)) => m.max_batch = max_batch(number(arg, it.next())?)?,
            ("--fit-max-batch", Some(m)) => m.fit_max_batch = true,
            ("--fast-forward", Some(m)) => m.fast_forward = true,
            ("--draft", Some(m)) => m.draft = true,
            ("--api-key-env", Some(_)) => {
                let var = it.next().context("--api-key-env needs a variable's name")?;
                if let Some(source) = sources.last_mut() {
                    source.1 = Some(var.clone());
                }
            }
            ("--tokenizer", Some(_)) => {
                let model = it.next().context("--tokenizer needs a model")?;
                if let Some(source) = sources.last_mut() {
                    source.2 = Some(model.clone());
                }
            }
            ("--render", Some(_)) => {
                let render = match it.next().map(String::as_str) {
                    Some("pool") => Render::Pool,
                    Some("engine") => Render::Engine,
                    _ => bail!("--render needs pool or engine"),
                };
                if let Some(source) = sources.last_mut() {
                    source.3 = Some(render);
                }
            }
            (
                "--alias" | "--ctx" | "--threads" | "--batch" | "--gpu-layers" | "--max-batch"
                | "--fit-max-batch" | "--fast-forward" | "--draft" | "--tokenizer" | "--render",
                None,
            ) => {
                bail!("{arg} is a serving flag of a member: put it after that member's --load")
            }
            (other, _) => bail!("unknown argument `{other}`\n{USAGE}"),
        }
    }
    if out.max_connections == 0 {
        bail!("--max-connections must be at least 1");
    }
    if http.addr.is_empty() {
        if http.key_env.is_some() || http.clamp_max_tokens {
            bail!(
                "--api-key-env before the first --load and --http-clamp-max-tokens go with --http"
            );
        }
    } else {
        out.http = Some(http);
    }
    for (member, (reference, key, tokenizer, render)) in out.members.iter_mut().zip(sources) {
        let settings = caldrix_pool::RemoteSettings {
            api_key_env: key.as_deref(),
            tokenizer: tokenizer.as_deref(),
            render,
        };
        let (model, script, remote) = caldrix_pool::member_source(&reference, &settings)?;
        (member.model, member.script, member.remote) = (model, script, remote);
    }
    Ok(out)
}

fn serve(args: ServeArgs) -> anyhow::Result<()> {
    let memory_limit = caldrix_pool::memory_limit();
    let config = PoolConfig {
        frames: args.frames,
        max_connections: args.max_connections,
        idle_timeout: (args.idle_timeout > 0).then(|| Duration::from_secs(args.idle_timeout)),
        context_budget: args
            .context_budget
            .unwrap_or_else(|| caldrix_pool::default_context_budget(memory_limit)),
        memory_limit,
        owner_uid: caldrix_client::trust::current_uid(),
    };
    // Before any model loads: a directory someone else controls is refused at once.
    caldrix_client::trust::prepare_socket_dir(&args.socket)?;
    let pool = Pool::new(config);
    // Every member loads before the socket is bound: a client that connects finds them.
    for member in args.members {
        let alias = member.alias.clone();
        pool.load(member).with_context(|| format!("cannot load member `{alias}`"))?;
    }
    let http = match &args.http {
        Some(h) => Some(http_config(h, &args.socket, args.frames)?),
        None => None,
    };
    let runtime = runtime()?;
    let served = runtime.block_on(async {
        let front = match (&args.http, http) {
            (Some(h), Some(config)) => Some((bind_http(&h.addr).await?, config)),
            _ => None,
        };
        let listener = bind(&args.socket).await?;
        tracing::info!(socket = %args.socket.display(), "serving");
        // The HTTP front is a client of the socket, so it starts once the socket is bound and
        // stops with the pool.
        let (stop_http, stopped) = tokio::sync::oneshot::channel::<()>();
        let front = front.map(|(listener, config)| {
            tokio::spawn(caldrix_http::serve(listener, config, async move {
                let _ = stopped.await;
            }))
        });
        let served = pool.serve(listener).await;
        let _ = stop_http.send(());
        if let Some(front) = front {
            // Open requests end with the pool's connections; a stuck one is not waited for.
            let ended = tokio::time::timeout(Duration::from_millis(500), front).await;
            if let Ok(Ok(Err(e))) = ended {
                tracing::warn!(error = %e, "the HTTP front failed");
            }
        }
        let _ = std::fs::remove_file(&args.socket);
        served.context("the pool's accept loop failed")
    });
    // `serve` returns within 1 s of a `stop`; what follows shares `EXIT_AFTER_SERVE`, so the
    // daemon is gone within 2 s of it however loaded the machine is.
    let deadline = std::time::Instant::now() + EXIT_AFTER_SERVE;
    // `stop` cancelled every generation; a request still on a blocking thread (a load) is
    // abandoned rather than waited for.
    runtime.shutdown_timeout(Duration::from_millis(500));
    // Dropping the pool joins each engine thread after its current step (cancelled, so
    // quick); under load a step may still take a while, and the process is exiting anyway:
    // wait what is left of the deadline, then leave the rest to the exit.
    let (dropped, done) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        drop(pool);
        let _ = dropped.send(());
    });
    let _ = done.recv_timeout(deadline.saturating_duration_since(std::time::Instant::now()));
    served
}

/// How long the daemon may take to exit once `serve` has returned (which it does within 1 s
/// of a `stop`): the runtime's shutdown and the engine threads' joins together.
const EXIT_AFTER_SERVE: Duration = Duration::from_millis(900);

/// The HTTP front's settings: the key is read from its variable now, so a missing one stops the
/// start instead of serving unguarded.
fn http_config(
    h: &HttpArgs,
    socket: &Path,
    frames: FrameFormat,
) -> anyhow::Result<caldrix_http::HttpConfig> {
    let mut config = caldrix_http::HttpConfig::new(socket.to_path_buf(), frames);
    config.clamp_max_tokens = h.clamp_max_tokens;
    if let Some(var) = &h.key_env {
        let key = std::env::var(var).ok().filter(|k| !k.is_empty());
        config.api_key =
            Some(key.with_context(|| format!("--api-key-env {var}: the variable is not set"))?);
    }
    Ok(config)
}

/// `--http ADDR`: a bare port listens on loopback; `HOST:PORT` where the user names it (a
/// non-loopback address is said in the log, since the front then answers the network).
async fn bind_http(addr: &str) -> anyhow::Result<tokio::net::TcpListener> {
    let addr = if addr.parse::<u16>().is_ok() { format!("127.0.0.1:{addr}") } else { addr.into() };
    let listener = tokio::net::TcpListener::bind(&addr)
        .await
        .with_context(|| format!("--http: cannot listen on {addr}"))?;
    let local = listener.local_addr()?;
    if !local.ip().is_loopback() {
        tracing::warn!(%local, "the HTTP front listens beyond this machine");
    }
    // Tests and scripts that pass port 0 read the port from here.
    eprintln!("caldrix: HTTP on http://{local}");
    Ok(listener)
}

/// Binds the socket (mode 0600, in the directory `serve` checked before loading); a file left
/// by a dead daemon is replaced, a live daemon is refused.
async fn bind(socket: &Path) -> anyhow::Result<tokio::net::UnixListener> {
    if socket.exists() {
        if tokio::net::UnixStream::connect(socket).await.is_ok() {
            bail!(
                "a pool is already serving on {} (stop it with `caldrix pool stop --socket {}`)",
                socket.display(),
                socket.display()
            );
        }
        tracing::info!(socket = %socket.display(), "replacing a stale socket file");
        std::fs::remove_file(socket)
            .with_context(|| format!("cannot remove {}", socket.display()))?;
    }
    let listener = tokio::net::UnixListener::bind(socket)
        .with_context(|| format!("cannot bind {}", socket.display()))?;
    std::fs::set_permissions(socket, std::fs::Permissions::from_mode(0o600))
        .with_context(|| format!("cannot make {} private", socket.display()))?;
    Ok(listener)
}

/// Where a member's layers went: `cpu (2 threads)`, or the device, its layers and memory.
fn lane_text(info: &caldrix_proto::MemberInfo) -> String {
    match (&info.lane, &info.gpu, info.threads) {
        (Some(caldrix_proto::Lane::Gpu), Some(g), _) => format!(
            "gpu {} ({}), {} of {} layers, {} MiB there, {} MiB of the device's {} MiB free at load",
            g.device,
            g.description,
            g.layers,
            g.total_layers,
            g.member_bytes >> 20,
            g.free_bytes >> 20,
            g.total_bytes >> 20
        ),
        (Some(lane), _, Some(threads)) => format!("{} ({threads} threads)", lane.name()),
        (Some(lane), _, None) => lane.name().to_owned(),
        (None, _, _) => "unknown (an older pool)".to_owned(),
    }
}

fn print_status(socket: &Path, status: &caldrix_proto::PoolStatus) {
    println!(
        "caldrix {} on {} ({} connections)",
        status.version,
        socket.display(),
        status.connections
    );
    for m in &status.members {
        let s = &m.store;
        if let Some(remote) = &m.info.remote {
            println!(
                "  {}: remote {} at {} ({}), rendered by the {}, tokenizer {}, window {}, queue {}, \
                 contexts {}",
                m.info.alias,
                remote.model,
                remote.url,
                remote.engine,
                remote.render.as_str(),
                m.info.model,
                m.info.context_window,
                m.info.queue_depth,
                m.contexts
            );
            println!("    prefix store: none (the remote engine caches prefixes itself)");
            continue;
        }
        println!(
            "  {}: {} ({}), window {}, footprint {} MiB, queue {}, contexts {}",
            m.info.alias,
            m.info.model,
            m.info.architecture,
            m.info.context_window,
            m.info.footprint_bytes >> 20,
            m.info.queue_depth,
            m.contexts
        );
        println!("    lane: {}", lane_text(&m.info));
        println!(
            "    prefix store: {} of {} MiB, {} entries, {} rows ({} parked), {} bytes/row, {} hits, {} misses",
            s.bytes >> 20,
            s.budget_bytes >> 20,
            s.entries,
            s.rows,
            s.parked_rows,
            s.bytes_per_row,
            s.hits,
            s.misses
        );
    }
}
