//! Firing an event: the matching handlers run in parallel, each with the event's JSON on stdin;
//! their effects are gathered in file order.

use std::collections::BTreeMap;
use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::output::{Effect, interpret};
use crate::process::{Spawn, run};
use crate::{HookEvent, Hooks, MAX_INJECTED_CHARS, PREVIEW_CHARS, Run};

/// What every hook input carries, and where the session keeps files.
#[derive(Clone, Debug)]
pub struct Session {
    pub id: String,
    /// The Claude Code format projection of the session (`<id>.claude.jsonl`).
    pub transcript_path: PathBuf,
    /// Where subagents' projections are (`<id>/subagents`): `SubagentStop`'s
    /// `agent_transcript_path` is `agent-<agent id>.jsonl` in it.
    pub subagents_dir: PathBuf,
    /// The working directory; handlers run in it.
    pub cwd: PathBuf,
    /// `CLAUDE_PROJECT_DIR`: the project's root.
    pub project_dir: PathBuf,
    /// Where injected text over [`MAX_INJECTED_CHARS`] is saved.
    pub spool_dir: PathBuf,
    /// The session's permission mode, by Claude Code's name (`default`, `plan`, ...).
    pub permission_mode: String,
}

/// Why a session starts (`SessionStart`'s `source`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StartSource {
    Startup,
    /// `--resume` or `--continue`.
    Resume,
}

impl StartSource {
    pub fn as_str(self) -> &'static str {
        match self {
            StartSource::Startup => "startup",
            StartSource::Resume => "resume",
        }
    }
}

/// Why a session ends (`SessionEnd`'s `reason`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EndReason {
    /// The request ended by itself (done, out of turns, killed by a bound or a hook): Claude
    /// Code's `other`, as its own headless runs end (none of `clear`, `logout`,
    /// `prompt_input_exit` fits).
    Other,
    /// A signal cancelled the run (aerix's own reason).
    Cancelled,
    /// The run failed (aerix's own reason: the pool, a named failure).
    Error,
}

impl EndReason {
    pub fn as_str(self) -> &'static str {
        match self {
            EndReason::Other => "other",
            EndReason::Cancelled => "cancelled",
            EndReason::Error => "error",
        }
    }
}

/// What started a compaction (`PreCompact`'s `trigger`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompactTrigger {
    /// The model asked for it.
    Manual,
    /// The runtime's own pass (a context over its soft limit or without room).
    Auto,
}

impl CompactTrigger {
    pub fn as_str(self) -> &'static str {
        match self {
            CompactTrigger::Manual => "manual",
            CompactTrigger::Auto => "auto",
        }
    }
}

/// The subagent a tool event fired in (its input then carries `agent_id`, `agent_type`).
#[derive(Clone, Copy, Debug)]
pub struct Subagent<'a> {
    pub agent_id: &'a str,
    pub agent_type: &'a str,
}

/// A tool call as a hook sees it ([`crate::view`]): Claude Code's name (or aerix's, without a
/// twin), the input in its terms, and aerix's own name, which matchers match too.
#[derive(Clone, Copy, Debug)]
pub struct ToolCall<'a> {
    pub subagent: Option<Subagent<'a>>,
    pub tool_name: &'a str,
    pub aerix_tool: &'a str,
    pub tool_input: &'a Value,
    pub tool_use_id: &'a str,
}

/// An event to fire, with its own input.
#[derive(Clone, Copy, Debug)]
pub enum Fire<'a> {
    SessionStart(StartSource),
    UserPromptSubmit {
        prompt: &'a str,
    },
    SessionEnd(EndReason),
    /// Before a call runs.
    PreToolUse(ToolCall<'a>),
    /// After a call that succeeded, with its result in Claude Code's shape.
    PostToolUse {
        call: ToolCall<'a>,
        tool_response: &'a Value,
    },
    /// After a call whose result is an error.
    PostToolUseFailure {
        call: ToolCall<'a>,
        error: &'a str,
        is_interrupt: bool,
    },
    /// The root's final (`stop_hook_active`: it was continued by a Stop hook before).
    Stop {
        last_assistant_message: &'a str,
        stop_hook_active: bool,
    },
    /// After routing: the route, the routes' scores (logprobs), and what the member answered
    /// when it was none of them.
    RouteDecision {
        route: &'a str,
        scores: &'a BTreeMap<String, f64>,
        raw: Option<&'a str>,
    },
    /// A line for the user.
    Notification {
        message: &'a str,
        title: &'a str,
        notification_type: &'a str,
    },
    /// An instruction file read at the start.
    InstructionsLoaded {
        file_path: &'a Path,
        memory_type: &'a str,
        load_reason: &'a str,
    },
    /// `custom_instructions` is empty: aerix's compaction takes none.
    PreCompact {
        agent: &'a str,
        trigger: CompactTrigger,
        custom_instructions: &'a str,
    },
    /// The context's tokens before and after the pass, and the segments it replaced.
    ContextCompact {
        agent: &'a str,
        before: u32,
        after: u32,
        compacted: u32,
    },
    /// After a compaction pass, as Claude Code names it.
    PostCompact {
        agent: &'a str,
        trigger: CompactTrigger,
    },
    /// An `agent` call spawns `agent` (an implementer or a verifier) for `parent`.
    AgentSpawn {
        agent: &'a str,
        parent: &'a str,
        agent_type: &'a str,
    },
    /// Before a subagent runs (`agent_type`: a definition's name, `implementer`, `verifier`).
    SubagentStart {
        agent: &'a str,
        agent_type: &'a str,
    },
    /// A subagent's final; a block continues it, the reason its next instruction.
    SubagentStop {
        agent: &'a str,
        agent_type: &'a str,
        last_assistant_message: &'a str,
        stop_hook_active: bool,
    },
    /// A verifier starts on an implementer's work (`attempt` from 1).
    Verify {
        agent: &'a str,
        implementer: &'a str,
        attempt: u32,
    },
    /// An attempt (`agent`, its implementer's id) is about to get a worktree named `name` of
    /// `base_commit`; a handler's stdout may name the path to make it at.
    WorktreeCreate {
        agent: &'a str,
        name: &'a str,
        base_commit: &'a str,
    },
    /// An attempt's worktree was removed.
    WorktreeRemove {
        agent: &'a str,
        worktree_path: &'a str,
    },
}

/// A handler that blocked the action or stopped the run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Blocked {
    pub command: String,
    pub reason: String,
}

/// What firing an event came to. An answer dropped unread is a hook that does nothing (the
/// screen once dropped `InstructionsLoaded`'s `continue: false` this way).
#[derive(Clone, Debug, Default)]
#[must_use = "a hook's answer (a block, `continue: false`, context) must be acted on"]
pub struct Fired {
    /// Every handler that ran, in file order.
    pub runs: Vec<Run>,
    /// The handlers' context for the model, in file order, separated by blank lines.
    pub context: Option<String>,
    /// The first handler that blocked (a prompt, a compaction, a call: PreToolUse's deny)
    /// or gave the model a reason (PostToolUse, Stop, SubagentStop).
    pub block: Option<Blocked>,
    /// PreToolUse: the first handler that asked to confirm the call, with its reason, when
    /// none denied it (the runtime's ask gate decides: headless denies, the screen asks).
    pub ask: Option<Blocked>,
    /// PreToolUse: the first handler's `updatedInput`, in Claude Code's terms.
    pub updated_input: Option<Value>,
    /// `continue: false`: the first handler that ended the run.
    pub stop: Option<Blocked>,
    /// One line each for the user: handlers that failed or timed out, `systemMessage`s.
    pub notes: Vec<String>,
}

impl<'a> Fire<'a> {
    pub fn event(self) -> HookEvent {
        match self {
            Fire::SessionStart(_) => HookEvent::SessionStart,
            Fire::UserPromptSubmit { .. } => HookEvent::UserPromptSubmit,
            Fire::SessionEnd(_) => HookEvent::SessionEnd,
            Fire::PreToolUse(_) => HookEvent::PreToolUse,
            Fire::PostToolUse { .. } => HookEvent::PostToolUse,
            Fire::PostToolUseFailure { .. } => HookEvent::PostToolUseFailure,
            Fire::Stop { .. } => HookEvent::Stop,
            Fire::RouteDecision { .. } => HookEvent::RouteDecision,
            Fire::Notification { .. } => HookEvent::Notification,
            Fire::InstructionsLoaded { .. } => HookEvent::InstructionsLoaded,
            Fire::PreCompact { .. } => HookEvent::PreCompact,
            Fire::ContextCompact { .. } => HookEvent::ContextCompact,
            Fire::PostCompact { .. } => HookEvent::PostCompact,
            Fire::AgentSpawn { .. } => HookEvent::AgentSpawn,
            Fire::SubagentStart { .. } => HookEvent::SubagentStart,
            Fire::SubagentStop { .. } => HookEvent::SubagentStop,
            Fire::Verify { .. } => HookEvent::Verify,
            Fire::WorktreeCreate { .. } => HookEvent::WorktreeCreate,
            Fire::WorktreeRemove { .. } => HookEvent::WorktreeRemove,
        }
    }

    /// What matchers are matched against (any of them; none: every handler).
    fn match_values(self) -> Vec<&'a str> {
        match self {
            Fire::SessionStart(source) => vec![source.as_str()],
            Fire::SessionEnd(reason) => vec![reason.as_str()],
            Fire::PreToolUse(call)
            | Fire::PostToolUse { call, .. }
            | Fire::PostToolUseFailure { call, .. } => vec![call.tool_name, call.aerix_tool],
            Fire::RouteDecision { route, .. } => vec![route],
            Fire::Notification { notification_type, .. } => vec![notification_type],
            Fire::InstructionsLoaded { load_reason, .. } => vec![load_reason],
            Fire::PreCompact { trigger, .. } | Fire::PostCompact { trigger, .. } => {
                vec![trigger.as_str()]
            }
            Fire::AgentSpawn { agent_type, .. }
            | Fire::SubagentStart { agent_type, .. }
            | Fire::SubagentStop { agent_type, .. } => vec![agent_type],
            Fire::UserPromptSubmit { .. }
            | Fire::Stop { .. }
            | Fire::ContextCompact { .. }
            | Fire::Verify { .. }
            | Fire::WorktreeCreate { .. }
            | Fire::WorktreeRemove { .. } => Vec::new(),
        }
    }

    fn input(self, session: &Session) -> Value {
        let mut input = json!({
            "session_id": session.id,
            "transcript_path": session.transcript_path,
            "cwd": session.cwd,
            "hook_event_name": self.event().name(),
            "permission_mode": session.permission_mode,
        });
        let tool = |input: &mut Value, call: ToolCall<'_>| {
            if let Some(sub) = call.subagent {
                input["agent_id"] = json!(sub.agent_id);
                input["agent_type"] = json!(sub.agent_type);
            }
            input["tool_name"] = json!(call.tool_name);
            input["tool_input"] = call.tool_input.clone();
            input["tool_use_id"] = json!(call.tool_use_id);
        };
        match self {
            Fire::SessionStart(source) => input["source"] = json!(source.as_str()),
            Fire::UserPromptSubmit { prompt } => input["prompt"] = json!(prompt),
            Fire::SessionEnd(reason) => input["reason"] = json!(reason.as_str()),
            Fire::PreToolUse(call) => tool(&mut input, call),
            Fire::PostToolUse { call, tool_response } => {
                tool(&mut input, call);
                input["tool_response"] = tool_response.clone();
            }
            Fire::PostToolUseFailure { call, error, is_interrupt } => {
                tool(&mut input, call);
                input["error"] = json!(error);
                input["is_interrupt"] = json!(is_interrupt);
            }
            Fire::Stop { last_assistant_message, stop_hook_active } => {
                input["stop_hook_active"] = json!(stop_hook_active);
                input["last_assistant_message"] = json!(last_assistant_message);
            }
            Fire::RouteDecision { route, scores, raw } => {
                input["route"] = json!(route);
                input["scores"] = json!(scores);
                if let Some(raw) = raw {
                    input["raw"] = json!(raw);
                }
            }
            Fire::Notification { message, title, notification_type } => {
                input["message"] = json!(message);
                input["title"] = json!(title);
                input["notification_type"] = json!(notification_type);
            }
            Fire::InstructionsLoaded { file_path, memory_type, load_reason } => {
                input["file_path"] = json!(file_path);
                input["memory_type"] = json!(memory_type);
                input["load_reason"] = json!(load_reason);
            }
            Fire::PreCompact { agent, trigger, custom_instructions } => {
                input["trigger"] = json!(trigger.as_str());
                input["custom_instructions"] = json!(custom_instructions);
                input["agent_id"] = json!(agent);
            }
            Fire::ContextCompact { agent, before, after, compacted } => {
                input["agent_id"] = json!(agent);
                input["before_tokens"] = json!(before);
                input["after_tokens"] = json!(after);
                input["compacted"] = json!(compacted);
            }
            Fire::PostCompact { agent, trigger } => {
                input["agent_id"] = json!(agent);
                input["trigger"] = json!(trigger.as_str());
            }
            Fire::AgentSpawn { agent, parent, agent_type } => {
                input["agent_id"] = json!(agent);
                input["agent_type"] = json!(agent_type);
                input["parent_id"] = json!(parent);
            }
            Fire::SubagentStart { agent, agent_type } => {
                input["agent_id"] = json!(agent);
                input["agent_type"] = json!(agent_type);
            }
            Fire::SubagentStop { agent, agent_type, last_assistant_message, stop_hook_active } => {
                input["agent_id"] = json!(agent);
                input["agent_type"] = json!(agent_type);
                input["stop_hook_active"] = json!(stop_hook_active);
                input["last_assistant_message"] = json!(last_assistant_message);
                input["agent_transcript_path"] =
                    json!(session.subagents_dir.join(format!("agent-{agent}.jsonl")));
            }
            Fire::Verify { agent, implementer, attempt } => {
                input["agent_id"] = json!(agent);
                input["agent_type"] = json!("verifier");
                input["implementer_id"] = json!(implementer);
                input["attempt"] = json!(attempt);
            }
            // Claude Code's fields (`name`, `base_commit`; `worktree_path`), with the agent.
            Fire::WorktreeCreate { agent, name, base_commit } => {
                input["agent_id"] = json!(agent);
                input["name"] = json!(name);
                input["base_commit"] = json!(base_commit);
            }
            Fire::WorktreeRemove { agent, worktree_path } => {
                input["agent_id"] = json!(agent);
                input["worktree_path"] = json!(worktree_path);
            }
        }
        input
    }
}

impl Hooks {
    /// Runs the handlers `fire` matches, in parallel, and gathers what they said. A handler
    /// still running once `cancelled()` is true is ended as one past its timeout.
    pub fn fire(
        &self,
        session: &Session,
        fire: Fire<'_>,
        cancelled: &(dyn Fn() -> bool + Sync),
    ) -> Fired {
        self.fire_until(session, fire, cancelled, &|| false)
    }

    /// As [`fire`](Self::fire); a handler in its grace after `TERM` is sent `KILL` at once
    /// when `hurried()` is true (a second signal: the process exits next).
    pub fn fire_until(
        &self,
        session: &Session,
        fire: Fire<'_>,
        cancelled: &(dyn Fn() -> bool + Sync),
        hurried: &(dyn Fn() -> bool + Sync),
    ) -> Fired {
        let event = fire.event();
        let handlers = self.matching(event, &fire.match_values());
        if handlers.is_empty() {
            return Fired::default();
        }
        let input = fire.input(session).to_string().into_bytes();
        let finished: Vec<_> = std::thread::scope(|scope| {
            let running: Vec<_> = handlers
                .iter()
                .map(|handler| {
                    let spawn = Spawn {
                        command: &handler.command,
                        cwd: &session.cwd,
                        project_dir: &session.project_dir,
                        env: &handler.env,
                        input: input.clone(),
                        timeout: handler.timeout(),
                        cancelled,
                        hurried,
                    };
                    scope.spawn(move || run(spawn))
                })
                .collect();
            running.into_iter().map(|r| r.join().ok()).collect()
        });
        let mut fired = Fired::default();
        let mut contexts = Vec::new();
        // PreToolUse's precedence: deny, then ask, then allow.
        let mut asked = None;
        for (handler, finished) in handlers.iter().zip(finished) {
            let Some(finished) = finished else { continue };
            let effect = interpret(event, &handler.command, &finished);
            let blocked = effect.block.is_some() || effect.stop.is_some() || effect.ask.is_some();
            fired.runs.push(Run {
                event,
                command: handler.command.clone(),
                ending: finished.ending.clone(),
                duration: finished.duration,
                blocked,
            });
            let Effect { context, block, stop, ask, updated_input, message, note } = effect;
            let blocked_by = |reason| Blocked { command: handler.command.clone(), reason };
            if let Some(reason) = stop
                && fired.stop.is_none()
            {
                fired.stop = Some(blocked_by(reason));
            }
            if let Some(reason) = block
                && fired.block.is_none()
            {
                fired.block = Some(blocked_by(reason));
            }
            if let Some(reason) = ask
                && asked.is_none()
            {
                asked = Some(blocked_by(reason));
            }
            if let Some(updated) = updated_input
                && fired.updated_input.is_none()
            {
                fired.updated_input = Some(updated);
            }
            if let Some(message) = message {
                fired.notes.push(format!("hooks: {} hook says: {message}", event.name()));
            }
            if let Some(note) = note {
                fired.notes.push(format!("hooks: {note}"));
            }
            if let Some(context) = context {
                contexts.push(fit(context, event, &session.spool_dir, &mut fired.notes));
            }
        }
        if fired.block.is_none() {
            fired.ask = asked;
        }
        if !contexts.is_empty() {
            fired.context = Some(contexts.join("\n\n"));
        }
        fired
    }
}

/// Injected text over [`MAX_INJECTED_CHARS`] is saved to a file and replaced by its path and a
/// [`PREVIEW_CHARS`] preview.
fn fit(text: String, event: HookEvent, spool_dir: &Path, notes: &mut Vec<String>) -> String {
    let chars = text.chars().count();
    if chars <= MAX_INJECTED_CHARS {
        return text;
    }
    let preview: String = text.chars().take(PREVIEW_CHARS).collect();
    match save(&text, event, spool_dir) {
        Ok(path) => format!(
            "[hook output of {chars} characters saved to {}; read it there. Its first {PREVIEW_CHARS} characters:]\n{preview}",
            path.display()
        ),
        Err(e) => {
            notes.push(format!(
                "hooks: a {} hook's output of {chars} characters could not be saved in {}: {e}; only its first {PREVIEW_CHARS} characters are kept",
                event.name(),
                spool_dir.display()
            ));
            format!(
                "[hook output of {chars} characters cut to its first {PREVIEW_CHARS}:]\n{preview}"
            )
        }
    }
}

/// `hook-<event>-<n>.txt`, the first `n` free.
fn save(text: &str, event: HookEvent, dir: &Path) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    for n in 1.. {
        let path = dir.join(format!("hook-{}-{n}.txt", event.name()));
        match OpenOptions::new().write(true).create_new(true).open(&path) {
            Ok(mut file) => {
                file.write_all(text.as_bytes())?;
                return Ok(path);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(std::io::Error::other("no free file name"))
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};
    use std::time::Duration;

    use super::{EndReason, Fire, Session, StartSource};
    use crate::config::parse;
    use crate::{Ending, MAX_INJECTED_CHARS};

    struct Dir(PathBuf);

    impl Dir {
        fn new(name: &str) -> Dir {
            let dir =
                std::env::temp_dir().join(format!("aerix-hooks-{name}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            Dir(dir)
        }

        fn session(&self) -> Session {
            Session {
                id: "s1".into(),
                transcript_path: self.0.join("s1.claude.jsonl"),
                subagents_dir: self.0.join("s1/subagents"),
                cwd: self.0.clone(),
                project_dir: self.0.clone(),
                spool_dir: self.0.join("spool"),
                permission_mode: "default".into(),
            }
        }

        fn hooks(&self, json: &str) -> crate::Hooks {
            parse(Path::new("hooks.json"), json).unwrap().hooks
        }
    }

    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn group(commands: &[&str]) -> String {
        let handlers: Vec<String> = commands
            .iter()
            .map(|c| serde_json::json!({"type": "command", "command": c}).to_string())
            .collect();
        format!("[{{\"hooks\": [{}]}}]", handlers.join(","))
    }

    #[test]
    fn inputs_carry_the_session_and_the_event() {
        let dir = Dir::new("input");
        let hooks = dir.hooks(&format!(
            r#"{{"hooks": {{"SessionStart": {0}, "UserPromptSubmit": {1}, "SessionEnd": {2}}}}}"#,
            group(&["cat > start.json"]),
            group(&["cat > prompt.json"]),
            group(&["cat > end.json"]),
        ));
        let session = dir.session();
        let started = hooks.fire(&session, Fire::SessionStart(StartSource::Resume), &|| false);
        assert_eq!(started.runs.len(), 1);
        let submitted =
            hooks.fire(&session, Fire::UserPromptSubmit { prompt: "fix it" }, &|| false);
        assert_eq!(submitted.runs.len(), 1);
        let fired = hooks.fire(&session, Fire::SessionEnd(EndReason::Other), &|| false);
        assert_eq!(fired.runs[0].ending, Ending::Exit(0));
        let read = |name: &str| -> serde_json::Value {
            serde_json::from_str(&std::fs::read_to_string(dir.0.join(name)).unwrap()).unwrap()
        };
        let start = read("start.json");
        assert_eq!(start["session_id"], "s1");
        assert_eq!(start["hook_event_name"], "SessionStart");
        assert_eq!(start["source"], "resume");
        assert_eq!(start["cwd"], dir.0.display().to_string());
        assert_eq!(start["transcript_path"], dir.0.join("s1.claude.jsonl").display().to_string());
        assert_eq!(read("prompt.json")["prompt"], "fix it");
        assert_eq!(read("end.json")["reason"], "other");
    }

    #[test]
    fn handlers_run_in_parallel_and_contexts_keep_file_order() {
        let dir = Dir::new("parallel");
        let hooks = dir.hooks(&format!(
            r#"{{"hooks": {{"SessionStart": {}}}}}"#,
            group(&["sleep 1; echo first", "sleep 1; echo second", "exit 1"])
        ));
        let fired = hooks.fire(&dir.session(), Fire::SessionStart(StartSource::Startup), &|| false);
        assert!(fired.runs[0].duration < Duration::from_millis(1900), "{:?}", fired.runs);
        assert_eq!(fired.context.as_deref(), Some("first\n\nsecond"));
        assert_eq!(fired.notes, ["hooks: SessionStart hook `exit 1` exited 1"]);
        assert_eq!(fired.runs.len(), 3);
    }

    #[test]
    fn a_long_context_is_saved_and_previewed() {
        let dir = Dir::new("long");
        let hooks = dir.hooks(&format!(
            r#"{{"hooks": {{"UserPromptSubmit": {}}}}}"#,
            group(&["head -c 12000 /dev/zero | tr '\\0' a"])
        ));
        let fired = hooks.fire(&dir.session(), Fire::UserPromptSubmit { prompt: "p" }, &|| false);
        let context = fired.context.unwrap();
        let saved = dir.0.join("spool/hook-UserPromptSubmit-1.txt");
        assert!(
            context.starts_with(&format!(
                "[hook output of 12000 characters saved to {}; read it there.",
                saved.display()
            )),
            "{context}"
        );
        assert!(context.len() < 2200 && context.len() > 2000);
        assert_eq!(std::fs::read_to_string(saved).unwrap().len(), 12_000);
        const { assert!(12_000 > MAX_INJECTED_CHARS) };
    }

    #[test]
    fn pre_compact_matches_its_trigger_and_blocks_by_exit_2_or_decision() {
        let dir = Dir::new("compact");
        let record = format!("cat > {}", dir.0.join("pre.json").display());
        let post = format!("cat > {}", dir.0.join("post.json").display());
        let command = |c: &str| serde_json::json!({"type": "command", "command": c});
        let block = r#"echo '{"decision": "block", "reason": "by hand"}'"#;
        let file = serde_json::json!({"hooks": {
            "PreCompact": [
                {"matcher": "auto", "hooks": [command(&record), command("echo 'keep it' >&2; exit 2")]},
                {"matcher": "manual", "hooks": [command(block)]},
            ],
            "ContextCompact": [{"hooks": [command(&post)]}],
        }});
        let hooks = dir.hooks(&file.to_string());
        let session = dir.session();
        let auto = crate::CompactTrigger::Auto;
        let fire = Fire::PreCompact { agent: "a1", trigger: auto, custom_instructions: "" };
        let fired = hooks.fire(&session, fire, &|| false);
        assert_eq!(fired.runs.len(), 2);
        assert_eq!(fired.block.unwrap().reason, "keep it");
        let manual = crate::CompactTrigger::Manual;
        let fire = Fire::PreCompact { agent: "a1", trigger: manual, custom_instructions: "" };
        assert_eq!(hooks.fire(&session, fire, &|| false).block.unwrap().reason, "by hand");
        let fire = Fire::ContextCompact { agent: "a1", before: 3000, after: 1900, compacted: 4 };
        let fired = hooks.fire(&session, fire, &|| false);
        assert_eq!((fired.runs.len(), fired.block), (1, None));
        let read = |name: &str| -> serde_json::Value {
            serde_json::from_str(&std::fs::read_to_string(dir.0.join(name)).unwrap()).unwrap()
        };
        let pre = read("pre.json");
        assert_eq!(pre["hook_event_name"], "PreCompact");
        assert_eq!((&pre["trigger"], &pre["custom_instructions"]), (&"auto".into(), &"".into()));
        let post = read("post.json");
        assert_eq!(post["hook_event_name"], "ContextCompact");
        assert_eq!(
            (&post["before_tokens"], &post["after_tokens"], &post["compacted"]),
            (&3000.into(), &1900.into(), &4.into())
        );
    }

    #[test]
    fn tool_events_match_either_name_and_deny_wins_over_ask() {
        let dir = Dir::new("tools");
        let record = |name: &str| format!("cat > {}", dir.0.join(name).display());
        let ask = r#"echo '{"hookSpecificOutput":{"permissionDecision":"ask","permissionDecisionReason":"sure?"}}'"#;
        let deny = "echo 'no' >&2; exit 2";
        let rewrite = r#"echo '{"hookSpecificOutput":{"updatedInput":{"command":"ls -a"}}}'"#;
        let file = serde_json::json!({"hooks": {"PreToolUse": [
            {"matcher": "Bash", "hooks": [{"type": "command", "command": ask}, {"type": "command", "command": record("pre.json")}]},
            {"matcher": "bash", "hooks": [{"type": "command", "command": rewrite}]},
            {"matcher": "Edit", "hooks": [{"type": "command", "command": deny}]},
        ]}});
        let hooks = dir.hooks(&file.to_string());
        let input = serde_json::json!({"command": "ls"});
        let call = super::ToolCall {
            subagent: Some(super::Subagent { agent_id: "a1.c2", agent_type: "implementer" }),
            tool_name: "Bash",
            aerix_tool: "bash",
            tool_input: &input,
            tool_use_id: "a1.c2.c1",
        };
        let fired = hooks.fire(&dir.session(), Fire::PreToolUse(call), &|| false);
        assert_eq!(fired.runs.len(), 3, "both names match");
        assert_eq!(fired.block, None);
        assert_eq!(fired.ask.unwrap().reason, "sure?");
        assert_eq!(fired.updated_input, Some(serde_json::json!({"command": "ls -a"})));
        let pre: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.0.join("pre.json")).unwrap())
                .unwrap();
        assert_eq!(
            (&pre["tool_name"], &pre["tool_input"], &pre["tool_use_id"]),
            (&"Bash".into(), &input, &"a1.c2.c1".into())
        );
        assert_eq!(
            (&pre["agent_id"], &pre["agent_type"]),
            (&"a1.c2".into(), &"implementer".into())
        );
        // Deny wins over ask whatever the order.
        let file = serde_json::json!({"hooks": {"PreToolUse": [{"hooks": [
            {"type": "command", "command": ask}, {"type": "command", "command": deny}]}]}});
        let hooks = dir.hooks(&file.to_string());
        let fired = hooks.fire(&dir.session(), Fire::PreToolUse(call), &|| false);
        assert_eq!(fired.block.unwrap().reason, "no");
        assert_eq!(fired.ask, None);
    }

    #[test]
    fn a_block_names_its_handler() {
        let dir = Dir::new("block");
        let hooks = dir.hooks(&format!(
            r#"{{"hooks": {{"UserPromptSubmit": {}}}}}"#,
            group(&["echo ok", "echo 'not today' >&2; exit 2"])
        ));
        let fired = hooks.fire(&dir.session(), Fire::UserPromptSubmit { prompt: "p" }, &|| false);
        let block = fired.block.unwrap();
        assert_eq!(
            (block.command.as_str(), block.reason.as_str()),
            ("echo 'not today' >&2; exit 2", "not today")
        );
        assert_eq!(fired.runs.iter().map(|r| r.blocked).collect::<Vec<_>>(), [false, true]);
    }

    #[test]
    fn subagent_events_match_the_agent_type_and_subagent_stop_blocks() {
        let dir = Dir::new("subagent");
        let record = |name: &str| format!("cat > {}", dir.0.join(name).display());
        let hooks = dir.hooks(&format!(
            r#"{{"hooks": {{"SubagentStart": [{{"matcher": "verifier", "hooks": [{{"type": "command", "command": "{}"}}]}}], "SubagentStop": {}, "AgentSpawn": {}, "Verify": [{{"matcher": "nothing-matches", "hooks": [{{"type": "command", "command": "{}"}}]}}]}}}}"#,
            record("start.json"),
            group(&["echo 'check again' >&2; exit 2"]),
            group(&[&record("spawn.json")]),
            record("verify.json"),
        ));
        let session = dir.session();
        let start = Fire::SubagentStart { agent: "a1.c3", agent_type: "implementer" };
        assert!(hooks.fire(&session, start, &|| false).runs.is_empty());
        let start = Fire::SubagentStart { agent: "a1.c3.v1", agent_type: "verifier" };
        assert_eq!(hooks.fire(&session, start, &|| false).runs.len(), 1);
        let spawn = Fire::AgentSpawn { agent: "a1.c3", parent: "a1", agent_type: "implementer" };
        assert_eq!(hooks.fire(&session, spawn, &|| false).runs.len(), 1);
        let verify = Fire::Verify { agent: "a1.c3.v1", implementer: "a1.c3", attempt: 1 };
        assert_eq!(
            hooks.fire(&session, verify, &|| false).runs.len(),
            1,
            "Verify takes no matcher"
        );
        let stop = Fire::SubagentStop {
            agent: "a1.c3",
            agent_type: "implementer",
            last_assistant_message: "done",
            stop_hook_active: false,
        };
        assert_eq!(hooks.fire(&session, stop, &|| false).block.unwrap().reason, "check again");
        let read = |name: &str| -> serde_json::Value {
            serde_json::from_str(&std::fs::read_to_string(dir.0.join(name)).unwrap()).unwrap()
        };
        let start = read("start.json");
        assert_eq!(
            (&start["agent_id"], &start["agent_type"]),
            (&"a1.c3.v1".into(), &"verifier".into())
        );
        let spawn = read("spawn.json");
        assert_eq!(
            (&spawn["hook_event_name"], &spawn["parent_id"]),
            (&"AgentSpawn".into(), &"a1".into())
        );
        let verify = read("verify.json");
        assert_eq!((&verify["implementer_id"], &verify["attempt"]), (&"a1.c3".into(), &1.into()));
    }
}
