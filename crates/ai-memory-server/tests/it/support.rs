use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU32, Ordering};

use ai_memory_core::Settings;
use ai_memory_index::Principal;
use ai_memory_server::{Caller, HookEvent, Memory, WritePage};
use tempfile::TempDir;

/// 2026-11-02 09:00:00 UTC.
pub const DAY1: i64 = 1_793_610_000;
pub const HOUR: i64 = 3_600;
pub const DAY: i64 = 24 * HOUR;

/// A fresh directory under the system's temp directory, removed when dropped.
pub fn temp(name: &str) -> TempDir {
    tempfile::Builder::new().prefix(&format!("aim-srv-{name}-")).tempdir().unwrap()
}

/// A memory on a fresh data directory whose clock the test moves.
pub struct Lab {
    pub memory: Memory,
    pub clock: Arc<AtomicI64>,
    session: AtomicU32,
    // Last: the data directory goes after the memory that has it open.
    _data: TempDir,
}

impl Lab {
    pub fn new(name: &str, settings: Settings) -> Lab {
        let clock = Arc::new(AtomicI64::new(DAY1));
        let c = clock.clone();
        let data = temp(name);
        let memory = Memory::open(data.path(), settings)
            .unwrap()
            .with_clock(Box::new(move || c.load(Ordering::SeqCst)));
        Lab { memory, clock, session: AtomicU32::new(0), _data: data }
    }

    pub fn at(&self, t: i64) {
        self.clock.store(t, Ordering::SeqCst);
    }

    fn event(&self, project: &str, prompt: Option<&str>, files: &[&str]) -> HookEvent {
        let (workspace, project) = project.split_once('/').unwrap();
        HookEvent {
            harness: "claude-code".into(),
            session_id: format!("s{}", self.session.load(Ordering::SeqCst)),
            workspace: workspace.into(),
            project: project.into(),
            prompt: prompt.map(str::to_owned),
            files: files.iter().map(|f| f.to_string()).collect(),
            ..HookEvent::default()
        }
    }

    /// A session in `project` (`workspace/name`) by `who`: starts (reporting `files`), the
    /// prompts, ends. Returns the session start's context.
    pub fn session(
        &self,
        who: Principal,
        project: &str,
        files: &[&str],
        prompts: &[&str],
    ) -> String {
        self.session.fetch_add(1, Ordering::SeqCst);
        let context = self.memory.session_start(who, &self.event(project, None, files)).unwrap();
        for p in prompts {
            assert!(self.memory.prompt_submit(who, &self.event(project, Some(p), &[])).unwrap());
        }
        self.memory.session_end(who, &self.event(project, None, &[])).unwrap();
        context
    }

    pub fn start(&self, who: Principal, project: &str) -> String {
        self.session.fetch_add(1, Ordering::SeqCst);
        self.memory.session_start(who, &self.event(project, None, &[])).unwrap()
    }

    pub fn write(&self, who: Principal, project: &str, path: &str, body: &str) {
        let (workspace, project) = project.split_once('/').unwrap();
        let caller = Caller { who, workspace: None, project: None };
        let req = WritePage {
            path: path.into(),
            body: body.into(),
            workspace: Some(workspace.into()),
            project: Some(project.into()),
            ..WritePage::default()
        };
        self.memory.write_page(&caller, &req).unwrap();
    }
}

/// `YYYY-MM-DD` of a unix time (UTC).
pub fn date_of(t: i64) -> String {
    // Days to a civil date (proleptic Gregorian).
    let z = t.div_euclid(86_400) + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}
