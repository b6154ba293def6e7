//! A tool's reply as the model reads it: its text blocks, its structured content (when no
//! text says it already), other kinds of content named; `isError` makes it a tool error.

use rmcp::model::{CallToolResult, ContentBlock};

pub(crate) fn text(reply: &CallToolResult) -> Result<String, String> {
    let mut parts: Vec<String> = Vec::new();
    for block in &reply.content {
        parts.push(match block {
            ContentBlock::Text(t) => t.text.clone(),
            ContentBlock::Image(i) => format!("[image: {}, not shown]", i.mime_type),
            ContentBlock::Audio(a) => format!("[audio: {}, not shown]", a.mime_type),
            ContentBlock::Resource(_) => "[embedded resource, not shown]".to_owned(),
            ContentBlock::ResourceLink(r) => format!("[resource link: {}]", r.uri),
            _ => "[content of a kind aerix does not read]".to_owned(),
        });
    }
    if let Some(structured) = &reply.structured_content
        && parts.is_empty()
    {
        parts.push(structured.to_string());
    }
    let text = if parts.is_empty() { "(no content)".to_owned() } else { parts.join("\n") };
    if reply.is_error == Some(true) { Err(text) } else { Ok(text) }
}
