//! Finding the pool, starting it when nothing answers (the spec's "Autostart"), and binding the
//! members a run needs.

use std::fs::OpenOptions;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use aerix_config::{Env, Member, Settings};
use anyhow::{Context as _, bail};
use caldrix_client::{Client, ClientError};
use caldrix_proto::{FrameFormat, Lane, MemberInfo, ServingFlags};

/// How often the socket is tried while the pool starts.
const POLL: Duration = Duration::from_millis(500);

/// A member a run uses: its alias in the pool, window, whether it takes `Json`, its lane and
/// engine threads, and the generations it decodes together, when the pool says.
#[derive(Clone, Debug)]
pub struct Bound {
    pub alias: String,
    pub window: u32,
    pub json: bool,
    pub lane: Option<Lane>,
    pub threads: Option<u32>,
    pub max_batch: Option<u32>,
    /// The device its layers went to, when the lane is `gpu`.
    pub gpu: Option<caldrix_proto::GpuInfo>,
}

impl Bound {
    /// The lane for a person: `cpu`, or `gpu` with the layers offloaded (`gpu 31/31 layers`).
    pub fn lane_text(&self) -> Option<String> {
        Some(match (self.lane?, &self.gpu) {
            (Lane::Gpu, Some(g)) => format!("gpu {}/{} layers", g.layers, g.total_layers),
            (lane, _) => lane.name().to_owned(),
        })
    }

    /// The device and what the member holds there, when its lane is `gpu`.
    pub fn device_text(&self) -> Option<String> {
        let g = self.gpu.as_ref().filter(|_| self.lane == Some(Lane::Gpu))?;
        Some(format!(
            "{} {}, {} MiB of {} MiB",
            g.device,
            g.description,
            g.member_bytes >> 20,
            g.total_bytes >> 20
        ))
    }
}

/// What a member is loaded with beyond its own settings: for the main member, aerix's defaults
/// where the benches measured them faster (docs/benchmarks.md), each a deviation from the
/// spec's plain single-stream loop and each turned off by setting it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Serving {
    pub batching: Batching,
    /// `--draft`: the member's `draft` setting, else on for a local main member (prompt-lookup
    /// drafting measured faster on turns under the turn schema and on copied edits).
    pub draft: Option<bool>,
}

impl Serving {
    /// The main member's (`parallel`: `delegation.parallel`, the pieces a turn runs at once).
    pub fn main(member: &Member, parallel: u32) -> Serving {
        let local = !is_remote(member);
        Serving {
            batching: Batching::of(member, Some(parallel)),
            draft: member.draft.or(local.then_some(true)),
        }
    }

    /// Another member's (decision, reflection): its own settings only.
    pub fn other(member: &Member) -> Serving {
        Serving { batching: Batching::of(member, None), draft: member.draft }
    }
}

fn is_remote(member: &Member) -> bool {
    member.model.starts_with("openai:")
}

/// How many of a member's generations the pool decodes together.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Batching {
    /// The pool's default, one at a time (a decision or reflection member, a remote member,
    /// `delegation.parallel = 1`).
    Single,
    /// `members.<role>.max_batch`: exactly this many, or the load is refused.
    Set(u32),
    /// The main member's default: a turn's `delegation.parallel` pieces decoded together, as
    /// many of them as fit the memory limit. A deviation from the spec's single-stream loop,
    /// taken because the batch bench measured it faster in every workload (docs/benchmarks.md).
    UpTo(u32),
}

impl Batching {
    /// `member`'s batching; `parallel` is `delegation.parallel` for the member the pieces run
    /// on (the main member), `None` for the others.
    pub fn of(member: &Member, parallel: Option<u32>) -> Batching {
        if let Some(n) = member.max_batch {
            return Batching::Set(n);
        }
        match parallel {
            Some(n) if n > 1 && !is_remote(member) => {
                Batching::UpTo(n.min(caldrix_proto::MAX_BATCH))
            }
            _ => Batching::Single,
        }
    }

    fn flags(self) -> (Option<u32>, Option<bool>) {
        match self {
            Batching::Single => (None, None),
            Batching::Set(n) => (Some(n), None),
            Batching::UpTo(n) => (Some(n), Some(true)),
        }
    }

    /// The startup note when the pool took fewer than the default asked for.
    pub fn note(self, bound: &Bound) -> Option<String> {
        let Batching::UpTo(asked) = self else { return None };
        let took = bound.max_batch?;
        (took < asked).then(|| {
            format!(
                "the pool decodes {took} of `{}`'s generations together, not {asked} \
                 (delegation.parallel × attempts): the KV windows of more would pass its memory limit",
                bound.alias
            )
        })
    }
}

/// The main member's generations one turn's pieces may run at once: `delegation.parallel`
/// pieces of `delegation.attempts` attempts each (at most the pool's batch bound).
pub fn generations(settings: &Settings) -> u32 {
    settings.delegation.parallel.saturating_mul(crate::bridge::attempts(settings))
}

/// A connection to the pool, started if needed.
pub async fn connect(
    settings: &Settings,
    env: &Env,
    notes: &mut Vec<String>,
) -> anyhow::Result<Client> {
    let socket = &settings.pool.socket;
    match Client::connect(socket, FrameFormat::Cbor, "aerix").await {
        Ok(client) => return Ok(client),
        Err(ClientError::Connect { .. }) => {}
        Err(e) => return Err(e).context(format!("the pool at {}", socket.display())),
    }
    autostart(settings, env, notes).await
}

async fn autostart(
    settings: &Settings,
    env: &Env,
    notes: &mut Vec<String>,
) -> anyhow::Result<Client> {
    let socket = &settings.pool.socket;
    let log_path = env
        .state_home()
        .map(|s| s.join("aerix/pool-start.log"))
        .context("no state directory: set HOME or XDG_STATE_HOME")?;
    if let Some(dir) = log_path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let log = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log_path)
        .with_context(|| format!("opening {}", log_path.display()))?;
    let mut command = Command::new(&settings.pool.caldrix);
    command
        .arg("pool")
        .arg("--socket")
        .arg(socket)
        .arg("--max-connections")
        // Room for the root's connection beside `parallel` pieces of one turn (each piece
        // has a connection of its own): the spec's defaults, 4 and 4, would leave one waiting.
        .arg(settings.pool.max_connections.max(generations(settings) + 1).to_string())
        .arg("--load")
        .arg(&settings.main.model)
        .args(member_flags(&settings.main, Serving::main(&settings.main, generations(settings))))
        // Its own process group: the pool outlives this run and ignores its terminal's signals.
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(log.try_clone().context("pool-start.log")?)
        .stderr(log);
    let mut child = command.spawn().with_context(|| {
        format!("cannot start the pool `{}` (pool.caldrix)", settings.pool.caldrix.display())
    })?;
    notes.push(format!(
        "started the pool (pid {}) on {}; its output goes to {}",
        child.id(),
        socket.display(),
        log_path.display()
    ));
    let timeout = Duration::from_secs(settings.pool.start_timeout_secs);
    let started = Instant::now();
    loop {
        if let Ok(client) = Client::connect(socket, FrameFormat::Cbor, "aerix").await {
            // The pool is left running for every aerix process; reap it in the background so
            // this process does not hold a zombie if it lives on.
            std::thread::spawn(move || child.wait());
            return Ok(client);
        }
        if let Ok(Some(status)) = child.try_wait() {
            bail!(
                "the pool exited ({status}) before opening its socket: {}",
                tail(&log_path).unwrap_or_else(|| format!("see {}", log_path.display()))
            );
        }
        if started.elapsed() >= timeout {
            bail!(
                "the pool did not open {} within pool.start_timeout_secs ({}s); it is still starting (pid {}), see {}",
                socket.display(),
                timeout.as_secs(),
                child.id(),
                log_path.display()
            );
        }
        tokio::time::sleep(POLL).await;
    }
}

/// The serving flags of a member as `caldrix pool` takes them.
fn member_flags(member: &Member, serving: Serving) -> Vec<String> {
    let mut flags = Vec::new();
    let (max_batch, fit) = serving.batching.flags();
    for (flag, value) in [
        ("--ctx", member.ctx),
        ("--threads", member.threads),
        ("--batch", member.batch),
        ("--gpu-layers", member.gpu_layers),
        ("--max-batch", max_batch),
    ] {
        if let Some(value) = value {
            flags.push(flag.to_owned());
            flags.push(value.to_string());
        }
    }
    for (flag, on) in [
        ("--fit-max-batch", fit),
        ("--fast-forward", member.fast_forward),
        ("--draft", serving.draft),
    ] {
        if on == Some(true) {
            flags.push(flag.to_owned());
        }
    }
    let render = member.render.map(|r| r.as_str().to_owned());
    for (flag, value) in [
        ("--api-key-env", &member.api_key_env),
        ("--tokenizer", &member.tokenizer),
        ("--render", &render),
    ] {
        if let Some(value) = value {
            flags.push(flag.to_owned());
            flags.push(value.clone());
        }
    }
    flags
}

/// The last lines of the start log, for an error.
fn tail(path: &Path) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let last = lines.len().saturating_sub(3);
    Some(lines[last..].join(" | ")).filter(|s| !s.is_empty())
}

/// The member serving `member`'s model, loading it (as `alias`, served as `serving` says)
/// when the pool has none.
pub async fn bind(
    client: &mut Client,
    member: &Member,
    alias: &str,
    serving: Serving,
    timeout: Duration,
) -> anyhow::Result<Bound> {
    let members = client.members().await.map_err(|e| named(e, "listing the pool's members"))?;
    if let Some(found) = find(&members, member) {
        return Ok(found);
    }
    // The alias may be taken by another model (another run's `--model`): use a fresh one.
    let taken = members.iter().any(|m| m.alias == alias);
    let alias =
        if taken { format!("{alias}-{}", short_hash(&member.model)) } else { alias.to_owned() };
    let (max_batch, fit_max_batch) = serving.batching.flags();
    let flags = ServingFlags {
        ctx: member.ctx,
        threads: member.threads,
        batch: member.batch,
        gpu_layers: member.gpu_layers,
        max_batch,
        fit_max_batch,
        fast_forward: member.fast_forward,
        draft: serving.draft,
        api_key_env: member.api_key_env.clone(),
        tokenizer: member.tokenizer.clone(),
        render: member.render,
    };
    client
        .load_member_within(&alias, &member.model, flags, timeout)
        .await
        .map_err(|e| named(e, &format!("loading `{}` into the pool", member.model)))?;
    let members = client.members().await.map_err(|e| named(e, "listing the pool's members"))?;
    find(&members, member).context("the pool loaded the member but does not list it")
}

/// A client error with what was being done; a pool that went away says `pool gone` first.
fn named(e: ClientError, doing: &str) -> anyhow::Error {
    if crate::runtime::pool_gone(&e) {
        anyhow::anyhow!("pool gone: {doing}: {e}")
    } else {
        anyhow::Error::from(e).context(doing.to_owned())
    }
}

fn find(members: &[MemberInfo], member: &Member) -> Option<Bound> {
    members.iter().find(|m| m.reference == member.model).map(|m| Bound {
        alias: m.alias.clone(),
        window: m.context_window,
        json: m.json_constraint,
        lane: m.lane,
        threads: m.threads,
        max_batch: m.max_batch,
        gpu: m.gpu.clone(),
    })
}

fn short_hash(text: &str) -> String {
    // FNV-1a: an alias suffix, not a security boundary.
    let mut hash: u32 = 0x811c_9dc5;
    for b in text.bytes() {
        hash = (hash ^ u32::from(b)).wrapping_mul(0x0100_0193);
    }
    format!("{hash:08x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn autostart_passes_the_batching_flags_and_only_the_ones_set() {
        let plain = Member::of("m.gguf".into());
        assert!(member_flags(&plain, Serving::other(&plain)).is_empty(), "the pool's defaults");
        let batched = Member {
            threads: Some(2),
            max_batch: Some(4),
            fast_forward: Some(false),
            draft: Some(true),
            ..Member::of("m.gguf".into())
        };
        let set = Batching::of(&batched, Some(2));
        assert_eq!(set, Batching::Set(4), "a set max_batch wins over delegation.parallel");
        let flags = member_flags(&batched, Serving::other(&batched));
        assert_eq!(flags, ["--threads", "2", "--max-batch", "4", "--draft"]);
        let remote = Member {
            api_key_env: Some("TEAM_KEY".into()),
            tokenizer: Some("smol.gguf".into()),
            ..Member::of("openai:http://h:8080#smol".into())
        };
        let rendered = Member {
            render: Some(caldrix_proto::Render::Engine),
            ..Member::of("openai:http://h:8000#qwen".into())
        };
        assert_eq!(member_flags(&rendered, Serving::other(&rendered)), ["--render", "engine"]);
        assert_eq!(Batching::of(&remote, Some(4)), Batching::Single, "the engine batches");
        assert_eq!(
            member_flags(&remote, Serving::other(&remote)),
            ["--api-key-env", "TEAM_KEY", "--tokenizer", "smol.gguf"],
            "the variable's name, never its value"
        );
    }

    #[test]
    fn the_main_member_decodes_a_turn_s_pieces_together_up_to_what_fits_and_drafts() {
        let plain = Member::of("m.gguf".into());
        let default = Batching::of(&plain, Some(4));
        assert_eq!(default, Batching::UpTo(4));
        let main = Serving::main(&plain, 4);
        assert_eq!(main, Serving { batching: default, draft: Some(true) });
        let flags = member_flags(&plain, main);
        assert_eq!(flags, ["--max-batch", "4", "--fit-max-batch", "--draft"]);
        let off = Member { max_batch: Some(1), draft: Some(false), ..plain.clone() };
        let serving = Serving::main(&off, 4);
        assert_eq!(serving, Serving { batching: Batching::Set(1), draft: Some(false) });
        assert_eq!(member_flags(&off, serving), ["--max-batch", "1"], "each turned off by setting");
        let remote = Member::of("openai:http://h:8080#m".into());
        let serving = Serving::main(&remote, 4);
        assert_eq!(serving, Serving { batching: Batching::Single, draft: None }, "the engine's");
        assert_eq!(Batching::of(&plain, Some(1)), Batching::Single);
        assert_eq!(Batching::of(&plain, None), Batching::Single, "a decision member");
        assert_eq!(Batching::of(&plain, Some(64)), Batching::UpTo(caldrix_proto::MAX_BATCH));
        let bound = |max_batch| Bound {
            alias: "main".into(),
            window: 8192,
            json: true,
            lane: None,
            threads: None,
            max_batch,
            gpu: None,
        };
        let note = default.note(&bound(Some(2))).unwrap();
        assert!(note.contains("decodes 2 of `main`'s generations together, not 4"), "{note}");
        assert_eq!(default.note(&bound(Some(4))), None);
        assert_eq!(default.note(&bound(None)), None, "an older pool says nothing");
        assert_eq!(Batching::Set(4).note(&bound(Some(1))), None);
    }

    /// The lane as the screen shows it: the layers on the GPU lane, the device beside it, and
    /// nothing of a device for a member on the CPU.
    #[test]
    fn the_lane_shows_where_the_layers_went() {
        let bound = || Bound {
            alias: "main".into(),
            window: 8192,
            json: true,
            lane: None,
            threads: None,
            max_batch: None,
            gpu: None,
        };
        let gpu = caldrix_proto::GpuInfo {
            device: "Vulkan0".into(),
            description: "llvmpipe".into(),
            total_bytes: 4 << 30,
            free_bytes: 3 << 30,
            layers: 31,
            total_layers: 31,
            member_bytes: 171 << 20,
        };
        let on_gpu = Bound { lane: Some(Lane::Gpu), gpu: Some(gpu.clone()), ..bound() };
        assert_eq!(on_gpu.lane_text().as_deref(), Some("gpu 31/31 layers"));
        assert_eq!(on_gpu.device_text().as_deref(), Some("Vulkan0 llvmpipe, 171 MiB of 4096 MiB"));
        let on_cpu = Bound { lane: Some(Lane::Cpu), gpu: Some(gpu), ..bound() };
        assert_eq!((on_cpu.lane_text().as_deref(), on_cpu.device_text()), (Some("cpu"), None));
    }
}
