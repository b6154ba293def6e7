//! Drawing the screen into a frame: the transcript (launch frame, startup block, requests),
//! the live region, the prompt editor and the footer, with the help and the gates over them.

use std::time::Instant;

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style, Stylize};
use ratatui::text::{Line, Span, Text};
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Wrap};

use crate::keys::{HELP_COMMANDS, HELP_KEYS};
use crate::launch::{MARK_FROM, WORDMARK_FROM, peak_mark, wordmark};
use crate::screen::{Entry, Gate, Screen, seconds};
use crate::startup::{Level, Note, ProfileRow};

const EMBER: Color = Color::Rgb(255, 122, 51);
const DIM: Style = Style::new().fg(Color::DarkGray);
/// The editor shows at most this many lines (the rest scrolls with the cursor).
const EDITOR_ROWS: usize = 6;
/// The thinking icon's frames, a frame every 100 ms.
const SPINNER: [&str; 8] = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧"];

/// Draws `screen` as it is at `now`.
pub fn draw(frame: &mut Frame<'_>, screen: &Screen, now: Instant) {
    let area = frame.area();
    let live = Paragraph::new(live_lines(screen, now)).wrap(Wrap { trim: false });
    let live_rows = u16::try_from(live.line_count(area.width)).unwrap_or(3);
    let shown = screen.editor.lines().len().clamp(1, EDITOR_ROWS);
    let [transcript, live_area, editor, footer] = Layout::vertical([
        Constraint::Min(1),
        Constraint::Length(live_rows),
        Constraint::Length(u16::try_from(shown + 1).unwrap_or(2)),
        Constraint::Length(1),
    ])
    .areas(area);
    draw_transcript(frame, screen, transcript);
    frame.render_widget(live, live_area);
    draw_editor(frame, screen, editor, shown);
    frame.render_widget(Paragraph::new(footer_line(screen)).style(DIM), footer);
    if let Some(gate) = screen.gate() {
        draw_gate(frame, gate, area);
    } else if screen.help_shown() {
        draw_help(frame, area);
    }
}

fn draw_transcript(frame: &mut Frame<'_>, screen: &Screen, area: Rect) {
    // Only the tail that can be seen is laid out: a keystroke costs the same on a long session.
    let wanted = usize::from(area.height) + usize::from(screen.scroll);
    let rows_of = |lines: &[Line<'static>]| {
        Paragraph::new(lines.to_vec()).wrap(Wrap { trim: false }).line_count(area.width)
    };
    let mut tail: Vec<Vec<Line<'static>>> = Vec::new();
    let mut rows = 0;
    for entry in screen.history.iter().rev() {
        let lines = entry_lines(entry);
        rows += rows_of(&lines);
        tail.push(lines);
        if rows >= wanted {
            break;
        }
    }
    if rows < wanted {
        let mut head = launch_lines(screen, area.width);
        head.push(Line::default());
        head.extend(startup_lines(screen));
        rows += rows_of(&head);
        tail.push(head);
    }
    let lines: Vec<Line<'static>> = tail.into_iter().rev().flatten().collect();
    let rows = u16::try_from(rows).unwrap_or(u16::MAX);
    let bottom = rows.saturating_sub(area.height);
    let top = bottom.saturating_sub(screen.scroll);
    frame.render_widget(Paragraph::new(lines).wrap(Wrap { trim: false }).scroll((top, 0)), area);
}

/// The launch frame: the art as wide as the terminal allows, the info line, the hints line.
fn launch_lines(screen: &Screen, width: u16) -> Vec<Line<'static>> {
    let mut lines = Vec::new();
    if width >= MARK_FROM {
        for (mark, word) in peak_mark().iter().zip(wordmark()) {
            lines.push(Line::from(vec![
                Span::raw(" "),
                Span::styled(*mark, Style::new().fg(EMBER)),
                Span::raw("   "),
                Span::styled(*word, Style::new().add_modifier(Modifier::BOLD)),
            ]));
        }
    } else if width >= WORDMARK_FROM {
        for word in wordmark() {
            lines.push(Line::from(vec![Span::raw(" "), Span::raw(*word).bold()]));
        }
    } else {
        lines.push(Line::from(vec![
            Span::raw(" "),
            Span::styled("aerix", Style::new().fg(EMBER).bold()),
        ]));
    }
    let launch = &screen.launch;
    let mut info = vec![launch.model.clone()];
    if let Some(lane) = &launch.lane {
        info.push(lane.clone());
    }
    info.push(format!("{} ctx", crate::screen::group(u64::from(launch.window))));
    info.push(launch.cwd.clone());
    info.push(format!("v{}", launch.version));
    if launch.resumed {
        info.push("resumed".to_owned());
    }
    lines.push(Line::default());
    lines.push(Line::from(format!(" {}", info.join(" · "))));
    lines.push(Line::styled(
        " enter send · ctrl-j newline · ↑ history · esc cancel · ctrl-d exit · ? help",
        DIM,
    ));
    lines
}

fn row(name: &str, value: String) -> Line<'static> {
    Line::from(vec![Span::styled(format!(" {name:<8} "), DIM), Span::raw(value)])
}

fn note_line(note: &Note) -> Line<'static> {
    match note.level {
        Level::Warning => Line::from(vec![
            Span::styled(" ▲ ", Style::new().fg(EMBER)),
            Span::raw(note.text.clone()),
        ]),
        Level::Error => Line::from(vec![
            Span::styled(" ✗ ", Style::new().fg(Color::Red)),
            Span::raw(note.text.clone()),
        ]),
        Level::Info => Line::from(format!("   {}", note.text)),
    }
}

fn startup_lines(screen: &Screen) -> Vec<Line<'static>> {
    let startup = &screen.startup;
    let mut lines = Vec::new();
    if let Some(pool) = &startup.pool {
        let mut parts = vec![pool.model.clone()];
        if let Some(lane) = &pool.lane {
            parts.push(match pool.threads {
                Some(threads) => format!("{lane} ({threads} threads)"),
                None => lane.clone(),
            });
        }
        if let Some(device) = &pool.device {
            parts.push(device.clone());
        }
        if let Some(decision) = &pool.decision {
            parts.push(format!("decision {decision}"));
        }
        parts.push(pool.socket.clone());
        lines.push(row("pool", parts.join(" · ")));
    }
    let profile = match &startup.profile {
        ProfileRow::Embedded => "embedded prompts".to_owned(),
        ProfileRow::Attached { name, branch, commit, tuned } => {
            let short: String = commit.chars().take(10).collect();
            let mut parts = vec![name.clone(), branch.clone(), short];
            if let Some(tuned) = tuned {
                parts.push(format!("{tuned} tuned"));
            }
            parts.join(" · ")
        }
    };
    lines.push(row("profile", profile));
    if let Some(loaded) = &startup.loaded {
        lines.push(row("loaded", loaded.clone()));
    }
    if let Some(session) = &startup.session {
        let state = if screen.launch.resumed { "resumed" } else { "new" };
        lines.push(row("session", format!("{session} · {state}")));
    }
    for note in &startup.notes {
        lines.push(note_line(note));
    }
    if let Some(ready) = startup.ready {
        lines.push(Line::from(vec![
            Span::styled(" ✓ ", Style::new().fg(Color::Green)),
            Span::raw(format!("ready in {}", seconds(ready))),
        ]));
    }
    lines
}

fn entry_lines(entry: &Entry) -> Vec<Line<'static>> {
    match entry {
        Entry::Prompt(prompt) => {
            let mut lines = vec![Line::default()];
            for (i, line) in prompt.lines().enumerate() {
                let lead = if i == 0 { " › " } else { "   " };
                lines.push(Line::from(vec![
                    Span::styled(lead, Style::new().fg(EMBER)),
                    Span::raw(line.to_owned()).bold(),
                ]));
            }
            lines
        }
        Entry::Step(text) => vec![Line::styled(format!("   {text}"), DIM)],
        Entry::Plan { agent, text } => {
            let mut lines = vec![Line::from(format!("   {agent} plan:"))];
            lines.extend(text.lines().map(|l| Line::from(format!("     {l}"))));
            lines
        }
        Entry::Answer(text) => {
            let mut lines = vec![Line::default()];
            lines.extend(text.lines().map(|l| Line::from(format!(" {l}"))));
            lines
        }
        Entry::Ended(level, text) => vec![note_line(&Note { level: *level, text: text.clone() })],
        Entry::Stats(text) => vec![Line::from(vec![
            Span::styled(" ✓ ", Style::new().fg(Color::Green)),
            Span::styled(text.clone(), DIM),
        ])],
        Entry::Note(note) => vec![note_line(note)],
    }
}

/// The status, context and diff lines.
fn live_lines(screen: &Screen, now: Instant) -> Vec<Line<'static>> {
    let mut lines = Vec::new();
    if let Some(status) = screen.status(now) {
        let tick = screen.tick(now);
        lines.push(Line::from(vec![
            Span::styled(format!(" {} ", SPINNER[tick % SPINNER.len()]), Style::new().fg(EMBER)),
            Span::raw(status),
        ]));
    }
    if let Some(context) = screen.context_line() {
        lines.push(Line::styled(format!("   {context}"), DIM));
    }
    if let Some(diff) = screen.diff_line() {
        lines.push(Line::styled(format!("   {diff}"), DIM));
    }
    lines
}

fn draw_editor(frame: &mut Frame<'_>, screen: &Screen, area: Rect, shown: usize) {
    let (row, col) = screen.editor.cursor();
    let first = (row + 1).saturating_sub(shown);
    let lines: Vec<Line<'static>> = screen
        .editor
        .lines()
        .iter()
        .enumerate()
        .skip(first)
        .take(shown)
        .map(|(i, line)| {
            let lead = if i == 0 { " › " } else { "   " };
            Line::from(vec![Span::styled(lead, Style::new().fg(EMBER)), Span::raw(line.clone())])
        })
        .collect();
    let block = Block::new().borders(Borders::TOP).border_style(DIM);
    frame.render_widget(Paragraph::new(lines).block(block), area);
    if screen.gate().is_none() && !screen.help_shown() {
        let x = area.x + 3 + u16::try_from(col).unwrap_or(0);
        let y = area.y + 1 + u16::try_from(row - first).unwrap_or(0);
        if x < area.right() && y < area.bottom() {
            frame.set_cursor_position((x, y));
        }
    }
}

fn footer_line(screen: &Screen) -> String {
    match screen.gate() {
        Some(Gate::Plan { .. }) => " plan: enter accepts · e edits · esc aborts".to_owned(),
        Some(Gate::Ask { always: true, .. }) => {
            " asks: y allows once · a always, in this project · n denies".to_owned()
        }
        Some(Gate::Ask { .. }) => " asks: y allows · n denies".to_owned(),
        Some(Gate::Trust { .. }) => {
            " trust: y trusts this project · n runs without its parts".to_owned()
        }
        None if screen.is_running() => " esc cancels · enter queues the prompt · ? help".to_owned(),
        None => " ? help · ctrl-d exit".to_owned(),
    }
}

/// A box in the middle of `area`, `height` rows high at most.
fn popup(area: Rect, height: u16) -> Rect {
    let width = area.width.saturating_sub(4).min(76);
    let height = height.min(area.height.saturating_sub(2));
    Rect {
        x: area.x + (area.width - width) / 2,
        y: area.y + (area.height.saturating_sub(height)) / 2,
        width,
        height,
    }
}

fn draw_boxed(frame: &mut Frame<'_>, area: Rect, title: &str, text: Text<'static>) {
    // The text's width inside the box (its borders and padding), not the screen's: counted at
    // the screen's width, a wrapped box came out short and cut its last lines (the keys).
    let inner_width = popup(area, 0).width.saturating_sub(4).max(1);
    let paragraph = Paragraph::new(text).wrap(Wrap { trim: false });
    let rows = u16::try_from(paragraph.line_count(inner_width)).unwrap_or(u16::MAX);
    let rect = popup(area, rows.saturating_add(2));
    let block = Block::bordered()
        .title(format!(" {title} "))
        .border_style(Style::new().fg(EMBER))
        .padding(ratatui::widgets::Padding::horizontal(1));
    frame.render_widget(Clear, rect);
    frame.render_widget(paragraph.block(block), rect);
}

fn draw_help(frame: &mut Frame<'_>, area: Rect) {
    let mut lines = vec![Line::from("keys").bold()];
    for (key, what) in HELP_KEYS {
        lines.push(Line::from(vec![
            Span::styled(format!("{key:<18}"), Style::new().fg(EMBER)),
            Span::raw(*what),
        ]));
    }
    lines.push(Line::default());
    lines.push(Line::from("commands").bold());
    for (command, what) in HELP_COMMANDS {
        lines.push(Line::from(vec![
            Span::styled(format!("{command:<18}"), Style::new().fg(EMBER)),
            Span::raw(*what),
        ]));
    }
    lines.push(Line::default());
    lines.push(Line::styled("any key closes this help", DIM));
    draw_boxed(frame, area, "help", Text::from(lines));
}

fn draw_gate(frame: &mut Frame<'_>, gate: &Gate, area: Rect) {
    match gate {
        Gate::Plan { agent, text } => {
            let mut lines =
                vec![Line::from(format!("{agent} wants to follow this plan:")), Line::default()];
            lines.extend(text.lines().map(|l| Line::from(l.to_owned())));
            lines.push(Line::default());
            lines.push(Line::from(vec![
                Span::styled("enter", Style::new().fg(EMBER)),
                Span::raw(" accepts · "),
                Span::styled("e", Style::new().fg(EMBER)),
                Span::raw(" edits · "),
                Span::styled("esc", Style::new().fg(EMBER)),
                Span::raw(" aborts"),
            ]));
            draw_boxed(frame, area, "plan", Text::from(lines));
        }
        Gate::Ask { agent, tool, input, reason, always } => {
            let mut keys =
                vec![Span::styled("y", Style::new().fg(EMBER)), Span::raw(" allows once · ")];
            if *always {
                keys.push(Span::styled("a", Style::new().fg(EMBER)));
                keys.push(Span::raw(" always, in this project · "));
            }
            keys.push(Span::styled("n", Style::new().fg(EMBER)));
            keys.push(Span::raw(" denies"));
            let lines = vec![
                Line::from(format!("{agent} calls {tool} {input}")),
                Line::default(),
                Line::from(reason.clone()),
                Line::default(),
                Line::from(keys),
            ];
            draw_boxed(frame, area, "allow this call?", Text::from(lines));
        }
        Gate::Trust { root, items, changed } => {
            draw_boxed(frame, area, "trust this project?", trust_text(area, root, items, *changed));
        }
    }
}

/// The trust question: the count, every item that fits (each cut past three rows with its
/// length; the binary escapes them), how many more, and the keys, which always fit: what a
/// project lists can never push the answer out of the box.
fn trust_text(area: Rect, root: &str, items: &[String], changed: bool) -> Text<'static> {
    let inner = usize::from(popup(area, 0).width.saturating_sub(4).max(8));
    let rows = |line: &Line<'static>| {
        Paragraph::new(line.clone()).wrap(Wrap { trim: false }).line_count(inner as u16)
    };
    let n = items.len();
    let things = if n == 1 { "1 thing".to_owned() } else { format!("{n} things") };
    let first = if changed {
        format!("{root} was trusted, but what it would run has changed. It would run {things}:")
    } else {
        format!("{root} is not trusted. It would run {things}:")
    };
    let keys = Line::from(vec![
        Span::styled("y", Style::new().fg(EMBER)),
        Span::raw(" trusts it (recorded until this list changes) · "),
        Span::styled("n", Style::new().fg(EMBER)),
        Span::raw(" runs without them"),
    ]);
    let first = Line::from(first);
    // The box's borders, the blank lines, the count of the rest.
    let fixed = 2 + rows(&first) + 1 + 1 + rows(&keys) + 1;
    let budget = usize::from(area.height.saturating_sub(2)).saturating_sub(fixed);
    let mut lines = vec![first, Line::default()];
    let mut used = 0;
    let mut shown = 0;
    for item in items {
        let line = Line::from(format!("  {}", cut(item, inner * 3 - 2)));
        let take = rows(&line);
        if used + take > budget {
            break;
        }
        used += take;
        shown += 1;
        lines.push(line);
    }
    if shown < n {
        lines.push(Line::from(format!(
            "  ... and {} more (answer n to see each in the notes)",
            n - shown
        )));
    }
    lines.push(Line::default());
    lines.push(keys);
    Text::from(lines)
}

/// `text` in at most `max` characters: past it, cut with its whole length.
fn cut(text: &str, max: usize) -> String {
    let count = text.chars().count();
    if count <= max {
        return text.to_owned();
    }
    let suffix = format!("... ({count} characters)");
    let keep = max.saturating_sub(suffix.chars().count());
    let mut out: String = text.chars().take(keep).collect();
    out.push_str(&suffix);
    out
}
