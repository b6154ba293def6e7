use super::declare::{Class, Section, section};
use super::*;

fn env() -> crate::Env {
    crate::Env::for_tests("/home/u")
}

/// One file applied as the user's (every key sets), its errors naming a project's path.
fn check(text: &str) -> Result<Settings, ConfigError> {
    let mut settings = defaults(&env());
    apply(&mut settings, Path::new("/p/.aerix/settings.toml"), SettingsScope::User, text)
        .map(|()| settings)
}

/// One file of `scope`, a project's trusted.
fn apply(
    settings: &mut Settings,
    path: &Path,
    scope: SettingsScope,
    text: &str,
) -> Result<(), ConfigError> {
    let held = RefCell::new(Held::default());
    super::apply(settings, &File { path, text, scope, admit: Admit::Trusted, held: &held })
}

section! {
    /// A table as a key added later would be declared: with a class and without.
    #[derive(Clone, Debug, PartialEq)]
    pub struct Probe {
        @inert known: u32 = 0;
        added: u32 = 0;
        @narrows(false) open: bool = false;
    }
}

#[test]
fn a_key_declared_without_a_class_is_withheld_from_an_untrusted_project() {
    assert_eq!(Probe::class("added"), Class::Gated);
    assert_eq!(Probe::class("known"), Class::Inert);
    let text = "[probe]\nknown = 1\nadded = 2\nopen = true\n";
    let table = || toml::from_str::<Table>(text).unwrap().remove("probe").unwrap();
    let path = Path::new("/p/.aerix/settings.toml");
    for (scope, admit, expected) in [
        (SettingsScope::Project, Admit::Untrusted, (1, 0, false)),
        (SettingsScope::Local, Admit::Untrusted, (1, 0, false)),
        (SettingsScope::Project, Admit::Trusted, (1, 2, false)),
        (SettingsScope::User, Admit::Untrusted, (1, 2, true)),
    ] {
        let held = RefCell::new(Held::default());
        let file = File { path, text, scope, admit, held: &held };
        let mut probe = Probe::declared();
        file.section(&mut probe, "probe", table(), None).unwrap();
        assert_eq!((probe.known, probe.added, probe.open), expected, "{scope:?} {admit:?}");
        let held = held.into_inner();
        let names = |s: &[ProjectSetting]| s.iter().map(|s| s.key.clone()).collect::<Vec<_>>();
        match (scope, admit) {
            (SettingsScope::User, _) => {
                assert!(held.withheld.is_empty() && held.refused.is_empty())
            }
            (_, Admit::Untrusted) => {
                assert_eq!(names(&held.withheld), ["probe.added"]);
                assert_eq!(names(&held.refused), ["probe.open"]);
            }
            (_, Admit::Trusted) => {
                assert!(held.withheld.is_empty());
                assert_eq!(names(&held.refused), ["probe.open"]);
            }
        }
    }
}

#[test]
fn every_key_of_a_project_is_inert_only_by_declaration() {
    // The keys an untrusted project may set; a key moved into this list is a decision to be
    // made here, in review, not by default.
    let inert: Vec<String> = [
        ("", Settings::KEYS.iter().map(|k| (*k, Settings::class(k))).collect::<Vec<_>>()),
        ("members.main", Member::KEYS.iter().map(|k| (*k, Member::class(k))).collect()),
        ("pool", PoolSettings::KEYS.iter().map(|k| (*k, PoolSettings::class(k))).collect()),
        ("delegation", Delegation::KEYS.iter().map(|k| (*k, Delegation::class(k))).collect()),
        (
            "context",
            ContextSettings::KEYS.iter().map(|k| (*k, ContextSettings::class(k))).collect(),
        ),
        ("hooks", HookSettings::KEYS.iter().map(|k| (*k, HookSettings::class(k))).collect()),
        ("plugins", PluginSettings::KEYS.iter().map(|k| (*k, PluginSettings::class(k))).collect()),
        (
            "sandbox",
            SandboxSettings::KEYS.iter().map(|k| (*k, SandboxSettings::class(k))).collect(),
        ),
        ("verify", VerifySettings::KEYS.iter().map(|k| (*k, VerifySettings::class(k))).collect()),
        ("mcp", McpSettings::KEYS.iter().map(|k| (*k, McpSettings::class(k))).collect()),
        ("tune", TuneSettings::KEYS.iter().map(|k| (*k, TuneSettings::class(k))).collect()),
    ]
    .into_iter()
    .flat_map(|(table, keys)| {
        keys.into_iter().filter(|(_, class)| *class == Class::Inert).map(move |(key, _)| {
            if table.is_empty() { key.to_owned() } else { format!("{table}.{key}") }
        })
    })
    .collect();
    assert_eq!(
        inert,
        [
            "max_turns",
            "profile",
            "members.main.ctx",
            "members.main.threads",
            "members.main.batch",
            "members.main.gpu_layers",
            "members.main.max_batch",
            "members.main.fast_forward",
            "members.main.draft",
            "delegation.max_turns",
            "delegation.retries",
            "delegation.depth",
            "delegation.parallel",
            "delegation.attempts",
            "delegation.attempt_temperature",
            "delegation.edit_format",
            "delegation.seed",
            "context.soft_ratio",
            "context.target_ratio",
            "context.max_new_tokens",
            "context.skills_chars",
            "context.tool_caps",
            "context.repeat_guard",
            "context.last_turn_final",
            "verify.review",
            "tune.sessions",
        ]
    );
}

#[test]
fn defaults_are_the_spec_figures() {
    let s = defaults(&env());
    assert_eq!((s.context.soft_ratio, s.context.target_ratio), (0.70, 0.50));
    assert_eq!(s.pool.start_timeout_secs, 900);
    assert_eq!(s.pool.max_connections, 4);
    assert_eq!(
        (s.delegation.max_turns, s.delegation.retries, s.delegation.depth, s.delegation.parallel),
        (40, 2, 3, 4)
    );
    assert_eq!(s.delegation.planner_tools, ["repo_map", "agent", "plan", "context"]);
    assert_eq!(s.pool.socket, PathBuf::from("/run/user/test/caldrix/pool.sock"));
}

#[test]
fn keys_merge_over_defaults() {
    let s = check(
        "max_turns = 12\n[members.main]\nmodel = \"m.gguf\"\nctx = 4096\n\
         [members.decision]\nmodel = \"d.gguf\"\n[context.tool_caps]\nread = 1000\n",
    )
    .unwrap();
    assert_eq!(s.max_turns, 12);
    assert_eq!((s.main.model.as_str(), s.main.ctx), ("m.gguf", Some(4096)));
    assert_eq!(s.decision.unwrap().model, "d.gguf");
    assert_eq!(s.context.tool_cap("read"), 1000);
    assert_eq!(s.context.tool_cap("bash"), 16_000);
    assert_eq!(s.context.tool_cap("unheard_of"), DEFAULT_TOOL_CAP);
    assert!(s.context.repeat_guard, "on by default");
    assert!(!check("[context]\nrepeat_guard = false\n").unwrap().context.repeat_guard);
    assert!(!s.context.last_turn_final, "off by default");
    assert!(check("[context]\nlast_turn_final = true\n").unwrap().context.last_turn_final);
    assert!(s.hooks.claude_settings, "on by default");
    assert!(!check("[hooks]\nclaude_settings = false\n").unwrap().hooks.claude_settings);
}

#[test]
fn the_tune_table_names_a_reflection_member_with_its_flags() {
    let s = defaults(&env());
    assert_eq!(s.tune, TuneSettings { member: None, sessions: 20 });
    let s =
        check("[tune]\nmember = \"r.gguf\"\nsessions = 5\n[tune.flags]\nctx = 2048\nthreads = 1\n")
            .unwrap();
    let member = s.tune.member.unwrap();
    assert_eq!(
        (member.model.as_str(), member.ctx, member.threads),
        ("r.gguf", Some(2048), Some(1))
    );
    assert_eq!(s.tune.sessions, 5);
    let e = check("[tune]\nsessions = 0\n").unwrap_err().to_string();
    assert!(e.contains("tune.sessions") && e.contains("at least 1"), "{e}");
    let e = check("[tune.flags]\nctx = 2048\n").unwrap_err().to_string();
    assert!(e.contains("needs `tune.member`"), "{e}");
    let e = check("[tune]\nmodel = \"x\"\n").unwrap_err().to_string();
    assert!(e.contains("model"), "{e}");
}

#[test]
fn a_member_s_batching_flags_are_kept_and_max_batch_is_bounded_by_key() {
    let s = defaults(&env());
    assert_eq!((s.main.max_batch, s.main.fast_forward, s.main.draft), (None, None, None));
    let s = check(
        "[members.main]\nmax_batch = 4\nfast_forward = false\n\
         [members.decision]\nmodel = \"d.gguf\"\ndraft = false\n\
         [tune]\nmember = \"r.gguf\"\n[tune.flags]\nmax_batch = 2\n",
    )
    .unwrap();
    assert_eq!((s.main.max_batch, s.main.fast_forward, s.main.draft), (Some(4), Some(false), None));
    assert_eq!(s.decision.unwrap().draft, Some(false));
    assert_eq!(s.tune.member.unwrap().max_batch, Some(2));
    for (text, key) in [
        ("[members.main]\nmax_batch = 0\n", "members.main.max_batch"),
        ("[members.main]\nmax_batch = 17\n", "members.main.max_batch"),
        ("[members.decision]\nmodel = \"d\"\nmax_batch = 99\n", "members.decision.max_batch"),
        ("[tune]\nmember = \"r\"\n[tune.flags]\nmax_batch = 0\n", "tune.flags.max_batch"),
    ] {
        let e = check(text).unwrap_err().to_string();
        assert!(e.contains(&format!("`{key}`")) && e.contains("between 1 and 16"), "{e}");
    }
}

#[test]
fn a_remote_member_s_settings_are_kept_and_malformed_ones_refused_by_key() {
    let s = check(
        "[members.main]\nmodel = \"openai:http://h:8080#qwen\"\ntokenizer = \"q.gguf\"\n\
         api_key_env = \"TEAM_KEY\"\n",
    )
    .unwrap();
    assert!(s.main.is_remote());
    assert_eq!(
        (s.main.tokenizer.as_deref(), s.main.api_key_env.as_deref()),
        (Some("q.gguf"), Some("TEAM_KEY"))
    );
    let s = check("[members.main]\nmodel = \"openai:http://h:8000#qwen\"\nrender = \"engine\"\n")
        .unwrap();
    assert_eq!(s.main.render, Some(caldrix_proto::Render::Engine));
    let e = check("[members.main]\nmodel = \"openai:http://h#m\"\nrender = \"server\"\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("render") && e.contains("engine"), "{e}");
    for (text, key, said) in [
        ("[members.main]\nmodel = \"openai:h#m\"\n", "members.main.model", "openai:http://"),
        ("[members.main]\nmodel = \"openai:http://h\"\n", "members.main.model", "#MODEL"),
        ("[members.main]\nmodel = \"openai:https://h#m\"\n", "members.main.model", "plain http"),
        (
            "[members.main]\nmodel = \"openai:http://h#m\"\napi_key_env = \"sk-123 x\"\n",
            "members.main.api_key_env",
            "not the key",
        ),
        (
            "[members.decision]\nmodel = \"d.gguf\"\ntokenizer = \"t.gguf\"\n",
            "members.decision.tokenizer",
            "a setting of a remote member",
        ),
        (
            "[members.decision]\nmodel = \"d.gguf\"\nrender = \"pool\"\n",
            "members.decision.render",
            "a setting of a remote member",
        ),
        (
            "[members.main]\nmodel = \"openai:http://h#m\"\ntokenizer = \"t\"\nrender = \"engine\"\n",
            "members.main.render",
            "one or the other",
        ),
    ] {
        let e = check(text).unwrap_err().to_string();
        assert!(e.contains(&format!("`{key}`")) && e.contains(said), "{text}: {e}");
    }
}

#[test]
fn plugins_are_enabled_by_name_and_claude_code_s_are_read_by_default() {
    assert_eq!(defaults(&env()).plugins, PluginSettings { enabled: vec![], claude_code: true });
    let s = check("[plugins]\nenabled = [\"fmt\", \"review@mkt\"]\nclaude_code = false\n").unwrap();
    assert_eq!(s.plugins.enabled, ["fmt", "review@mkt"]);
    assert!(!s.plugins.claude_code);
    let e = check("[plugins]\nenabled = [\" \"]\n").unwrap_err().to_string();
    assert!(e.contains(":2:") && e.contains("`plugins.enabled`"), "{e}");
}

#[test]
fn errors_name_file_line_and_key() {
    let cases = [
        ("[context]\nsoft_ratio = \"high\"\n", 2, "context.soft_ratio"),
        ("[pool]\nmax_conections = 3\n", 2, "pool.max_conections"),
        ("[delegation]\nparallel = 0\n", 2, "delegation.parallel"),
        ("[context]\nsoft_ratio = 0.4\n", 2, "context.soft_ratio"),
        ("max_turns = 3\n[members.main\nmodel = 1\n", 2, "members.main"),
        ("[members.decision]\nctx = 2048\n", 0, "members.decision.model"),
    ];
    for (text, line, key) in cases {
        let error = check(text).unwrap_err();
        let message = error.to_string();
        assert!(message.starts_with("/p/.aerix/settings.toml"), "{message}");
        if line > 0 {
            assert!(message.contains(&format!(":{line}:")), "{text:?}: {message}");
        }
        assert!(message.contains(&format!("`{key}`")), "{text:?}: {message}");
    }
}

/// Every key a settings file may set, as `docs/configuration.md`'s table names it: a member's
/// keys under `members.main` (`members.decision.*` the same), `tune.flags` as one table, a
/// map's entries as `context.tool_caps.<tool>`.
fn code_keys() -> Vec<String> {
    fn under<S: Section>(table: &str, out: &mut Vec<String>) {
        out.extend(S::doc_keys().into_iter().map(|k| format!("{table}.{k}")));
    }
    let mut out = Settings::doc_keys();
    under::<Member>("members.main", &mut out);
    out.push("members.decision.*".to_owned());
    out.extend(keys::TUNE_MEMBER.iter().map(|k| format!("tune.{k}")));
    under::<TuneSettings>("tune", &mut out);
    under::<PoolSettings>("pool", &mut out);
    under::<Delegation>("delegation", &mut out);
    under::<ContextSettings>("context", &mut out);
    under::<HookSettings>("hooks", &mut out);
    under::<PluginSettings>("plugins", &mut out);
    under::<SandboxSettings>("sandbox", &mut out);
    under::<keys::VerifySettings>("verify", &mut out);
    under::<keys::McpSettings>("mcp", &mut out);
    under::<PermissionSettings>("permissions", &mut out);
    out
}

/// The rows of the table under "## Settings files" in `docs/configuration.md`: (key, meaning).
fn doc_rows() -> Vec<(String, String)> {
    let doc = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/configuration.md"),
    )
    .unwrap();
    let section = doc.split("\n## Settings files\n").nth(1).unwrap();
    let table = section.split("\n| key | default | meaning |\n|---|---|---|\n").nth(1).unwrap();
    table
        .lines()
        .take_while(|line| line.starts_with('|'))
        .map(|line| {
            let cells: Vec<&str> = line.split(" | ").collect();
            let key = cells[0].trim_start_matches("| ").trim_matches('`').to_owned();
            (key, cells.last().unwrap().to_owned().to_owned())
        })
        .collect()
}

#[test]
fn the_documented_table_lists_exactly_the_keys_a_file_may_set() {
    let code = code_keys();
    let rows = doc_rows();
    let doc: Vec<&str> = rows.iter().map(|(key, _)| key.as_str()).collect();
    let undocumented: Vec<&String> = code.iter().filter(|k| !doc.contains(&k.as_str())).collect();
    let unknown: Vec<&&str> = doc.iter().filter(|k| !code.contains(&(**k).to_owned())).collect();
    assert!(undocumented.is_empty(), "keys the doc's table lacks: {undocumented:?}");
    assert!(unknown.is_empty(), "keys the doc's table has and no file may set: {unknown:?}");
    let mut once = doc.clone();
    once.sort_unstable();
    once.dedup();
    assert_eq!(once.len(), doc.len(), "a key twice in the doc's table: {doc:?}");
    // `tune.flags` is one row: its meaning names the flags, each of them.
    let (_, flags) = rows.iter().find(|(key, _)| key == "tune.flags").unwrap();
    for flag in keys::FLAGS {
        assert!(flags.contains(&format!("`{flag}`")), "tune.flags's row lacks `{flag}`: {flags}");
    }
    // And every key the table names is one a file may really set.
    for key in Member::KEYS {
        let text = format!("[members.decision]\nmodel = \"d.gguf\"\n{key} = 0\n");
        let e = check(&text).map(|_| String::new()).unwrap_or_else(|e| e.to_string());
        assert!(!e.contains("unknown field"), "{key}: {e}");
    }
}

#[test]
fn a_doc_key_missing_from_the_code_or_the_doc_is_caught() {
    // The comparison above is between two real lists: a key only one of them has shows.
    let code = code_keys();
    assert!(code.contains(&"context.tool_caps.<tool>".to_owned()), "{code:?}");
    assert!(code.contains(&"members.main.api_key_env".to_owned()), "{code:?}");
    assert!(!code.contains(&"members.main.flags".to_owned()), "{code:?}");
    let e = check("[tune.flags]\nmodel = \"x\"\n").unwrap_err().to_string();
    assert!(e.contains("`tune.flags.model`") && e.contains("unknown field"), "{e}");
}

#[test]
fn unknown_keys_are_refused_with_the_keys_of_their_table() {
    let e = check("[pool]\nmax_conections = 3\n").unwrap_err().to_string();
    assert!(
        e.contains(
            "unknown field `max_conections`, expected one of `caldrix`, `socket`, \
             `start_timeout_secs`, `max_connections`"
        ),
        "{e}"
    );
    let e = check("[members.extra]\nmodel = \"x\"\n").unwrap_err().to_string();
    assert!(e.contains("`members.extra`") && e.contains("`main` or `decision`"), "{e}");
    let e = check("turns = 3\n").unwrap_err().to_string();
    assert!(e.contains(":1:") && e.contains("expected one of `max_turns`, `profile`, `members`"));
    let e = check("pool = 3\n").unwrap_err().to_string();
    assert!(e.contains("`pool`") && e.contains("must be a table"), "{e}");
    let e = check("[context.tool_caps]\nread = 100\n").unwrap_err().to_string();
    assert!(e.contains(":2:") && e.contains("`context.tool_caps.read`"), "{e}");
}

#[test]
fn a_later_file_layers_over_an_earlier_one_key_by_key() {
    let mut s = defaults(&env());
    let path = Path::new("/u/settings.toml");
    apply(
        &mut s,
        path,
        SettingsScope::Project,
        "[context.tool_caps]\nread = 1000\n[tune]\nmember = \"r.gguf\"\n",
    )
    .unwrap();
    apply(
        &mut s,
        path,
        SettingsScope::Project,
        "[context.tool_caps]\nbash = 2000\n[tune.flags]\nctx = 512\n",
    )
    .unwrap();
    assert_eq!((s.context.tool_cap("read"), s.context.tool_cap("bash")), (1000, 2000));
    assert_eq!(s.context.tool_cap("grep"), 12_000);
    let member = s.tune.member.unwrap();
    assert_eq!((member.model.as_str(), member.ctx), ("r.gguf", Some(512)));
}

#[test]
fn each_file_s_permissions_are_kept_apart_with_where_they_came_from() {
    let mut s = defaults(&env());
    let user = Path::new("/u/settings.toml");
    let project = Path::new("/p/.aerix/settings.toml");
    let text = "[permissions]\nallow = [\"Bash(npm run test:*)\"]\ndefault_mode = \"plan\"\n";
    apply(&mut s, user, SettingsScope::User, text).unwrap();
    apply(&mut s, project, SettingsScope::Project, "[permissions]\ndeny = [\"Read(./.env)\"]\n")
        .unwrap();
    assert_eq!(s.permissions.len(), 2);
    let (first, second) = (&s.permissions[0], &s.permissions[1]);
    assert_eq!((first.path.as_path(), first.scope), (user, SettingsScope::User));
    assert_eq!(first.table.allow, ["Bash(npm run test:*)"]);
    assert_eq!(first.table.default_mode, Some(crate::PermissionMode::Plan));
    assert_eq!(
        (second.scope, second.table.deny.as_slice()),
        (SettingsScope::Project, &["Read(./.env)".to_owned()][..])
    );
    assert!(second.table.allow.is_empty() && second.table.default_mode.is_none());

    let e = check("[permissions]\ndefault_mode = \"yolo\"\n").unwrap_err().to_string();
    assert!(e.contains(":2:") && e.contains("`permissions.default_mode`"), "{e}");
    assert!(e.contains("not a permission mode"), "{e}");
    let e = check("[permissions]\nallowed = []\n").unwrap_err().to_string();
    assert!(e.contains("`permissions.allowed`") && e.contains("expected one of"), "{e}");
}

#[test]
fn mcp_servers_are_stdio_or_http_and_a_bad_one_is_named() {
    let s = check(
        "[mcp]\ntimeout_secs = 5\n[mcp.servers.mem]\ncommand = \"ai-memory\"\nargs = [\"mcp\"]\n\
         [mcp.servers.web]\nurl = \"http://h/mcp\"\nheaders = { Authorization = \"Bearer ${T}\" }\n",
    )
    .unwrap();
    assert_eq!(s.mcp.timeout_secs, 5);
    assert_eq!(s.mcp.servers.0["mem"].args, ["mcp"]);
    assert_eq!(s.mcp.servers.0["web"].headers["Authorization"], "Bearer ${T}");
    for (text, key, words) in [
        ("[mcp.servers.x]\ncommand = \"a\"\nurl = \"b\"\n", "mcp.servers.x", "either `command`"),
        ("[mcp.servers.x]\nargs = []\n", "mcp.servers.x", "either `command`"),
        ("[mcp.servers.x]\ncommand = \"a\"\ncwd = \"/\"\n", "mcp.servers.x", "unknown field `cwd`"),
        ("[mcp.servers.a__b]\ncommand = \"a\"\n", "mcp.servers.a__b", "no `__`"),
        ("[mcp]\ntimeout_secs = 0\n", "mcp.timeout_secs", "1 to 3600"),
    ] {
        let e = check(text).unwrap_err().to_string();
        assert!(e.contains(&format!("`{key}`")) && e.contains(words), "{text:?}: {e}");
    }
}

#[test]
fn edit_format_is_json_or_whole_and_another_is_refused_by_key() {
    assert_eq!(check("").unwrap().delegation.edit_format, crate::EditFormat::Json);
    let s = check("[delegation]\nedit_format = \"whole\"\n").unwrap();
    assert_eq!(s.delegation.edit_format, crate::EditFormat::Whole);
    let e = check("[delegation]\nedit_format = \"diff\"\n").unwrap_err().to_string();
    assert!(e.contains("edit_format") && e.contains("json") && e.contains("whole"), "{e}");
}
