//! `caldrix run MODEL --prompt TEXT`: render, tokenize, generate, print.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{Context, bail};
use caldrix_engine::{
    Constraint, GenerateParams, GenerationPrompt, Message, Model, ModelParams, RepeatPenalty,
    Sampling, SessionParams,
};
use clap::Args;
use serde_json::json;

#[derive(Args, Debug)]
pub struct RunArgs {
    /// A GGUF file, or a Hugging Face reference (owner/repo:QUANT, owner/repo/FILE.gguf),
    /// downloaded into the hub cache when missing.
    model: String,
    /// The user's message.
    #[arg(long)]
    prompt: String,
    /// A system message before it.
    #[arg(long)]
    system: Option<String>,
    /// Constrain the output to JSON valid against the schema in FILE.
    #[arg(long, value_name = "FILE", conflicts_with = "one_of")]
    json_schema: Option<PathBuf>,
    /// Constrain the output to one of these comma-separated options, each scored.
    #[arg(long, value_name = "A,B,C", value_delimiter = ',')]
    one_of: Option<Vec<String>>,
    /// Also print one JSON line with the scores (per token, or per OneOf option).
    #[arg(long)]
    logprobs: bool,
    /// Alternatives reported per token with --logprobs.
    #[arg(long, default_value_t = 0, value_name = "K")]
    top_logprobs: usize,
    #[arg(long, default_value_t = 256, value_name = "N")]
    max_new_tokens: u32,
    /// Seed of the sampler (used when --temperature > 0).
    #[arg(long, default_value_t = 0, value_name = "N")]
    seed: u64,
    /// 0 is greedy.
    #[arg(long, default_value_t = 0.0, value_name = "X")]
    temperature: f32,
    #[arg(long, default_value_t = 1.0, value_name = "P")]
    top_p: f32,
    /// Repetition penalty over the last 64 generated tokens (1 is off).
    #[arg(long, default_value_t = 1.0, value_name = "X")]
    repeat_penalty: f32,
    /// Context window in tokens (default: the smaller of 4096 and the model's).
    #[arg(long, value_name = "N")]
    ctx: Option<u32>,
    /// CPU threads (default: every core).
    #[arg(long, value_name = "N")]
    threads: Option<u32>,
    /// Prefill batch size.
    #[arg(long, default_value_t = 512, value_name = "N")]
    batch: u32,
    /// Layers offloaded to a GPU, or `auto` (the default): what fits the device's free
    /// memory, none without a usable GPU backend. Where they went is logged at
    /// CALDRIX_LOG=info.
    #[arg(long, default_value = "auto", value_name = "N|auto", value_parser = gpu_layers)]
    gpu_layers: GpuLayersArg,
    /// Generations decoded together (1 to 16): a pool member's flag, checked here too; one
    /// generation has nothing to batch.
    #[arg(long, default_value_t = 1, value_name = "N", value_parser = max_batch)]
    max_batch: u32,
    /// Append the tokens a constraint forces in one batch (output is the same).
    #[arg(long)]
    fast_forward: bool,
    /// Prompt-lookup drafting, verified in one batch (output is the same).
    #[arg(long)]
    draft: bool,
}

/// `--gpu-layers`'s value: `None` is auto.
#[derive(Debug, Clone, Copy)]
struct GpuLayersArg(Option<u32>);

fn gpu_layers(value: &str) -> Result<GpuLayersArg, String> {
    crate::pool::gpu_layers("--gpu-layers", Some(&value.to_owned()))
        .map(GpuLayersArg)
        .map_err(|e| e.to_string())
}

fn max_batch(value: &str) -> Result<u32, String> {
    let n = value.parse().map_err(|_| format!("`{value}` is not a valid number"))?;
    crate::pool::max_batch(n).map_err(|e| e.to_string())
}

pub fn run(args: &RunArgs) -> anyhow::Result<()> {
    // A pool member's flag, so that both take one set: one generation has nothing to batch.
    let _ = args.max_batch;
    let constraint = if let Some(file) = &args.json_schema {
        let text = std::fs::read_to_string(file)
            .with_context(|| format!("cannot read {}", file.display()))?;
        let schema = serde_json::from_str(&text)
            .with_context(|| format!("{} is not JSON", file.display()))?;
        Constraint::Json(schema)
    } else if let Some(options) = &args.one_of {
        Constraint::OneOf(options.clone())
    } else {
        Constraint::None
    };
    if args.temperature.is_nan() || args.temperature < 0.0 {
        bail!("--temperature must be 0 or more");
    }
    if args.top_p.is_nan() || args.top_p <= 0.0 || args.top_p > 1.0 {
        bail!("--top-p must be in (0, 1]");
    }
    let sampling = if args.temperature == 0.0 {
        Sampling::Greedy
    } else {
        Sampling::Random { temperature: args.temperature, top_p: args.top_p, seed: args.seed }
    };
    let path = caldrix_hub::Hub::from_env().resolve_str(&args.model)?;
    let params = ModelParams {
        gpu_layers: args.gpu_layers.0,
        window: args.ctx,
        generations: 1,
        vocab_only: false,
    };
    let model = Model::load(&path, &params)?;
    let mut session = model.session(&SessionParams {
        n_ctx: args.ctx,
        threads: args.threads,
        batch: args.batch,
        ..SessionParams::default()
    })?;
    let mut messages = Vec::new();
    if let Some(system) = &args.system {
        messages.push(Message::new("system", system.as_str()));
    }
    messages.push(Message::new("user", args.prompt.as_str()));
    let rendered = model.render(&messages, GenerationPrompt::Add)?;
    let prompt = model.tokenize_prompt(&rendered);
    let params = GenerateParams {
        max_new_tokens: args.max_new_tokens,
        sampling,
        constraint,
        logprobs: args.logprobs.then_some(args.top_logprobs),
        repeat_penalty: (args.repeat_penalty != 1.0)
            .then_some(RepeatPenalty { penalty: args.repeat_penalty, last_n: 64 }),
        fast_forward: args.fast_forward,
        draft: args.draft,
    };
    let out = session.generate(&prompt, &params)?;
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{}", out.text)?;
    if args.logprobs {
        let scores = if let (Some(scores), Some(options)) = (&out.one_of, &args.one_of) {
            let per_option: serde_json::Map<String, serde_json::Value> =
                options.iter().zip(&scores.logprobs).map(|(o, l)| (o.clone(), json!(l))).collect();
            json!({ "chosen": options[scores.chosen], "logprobs": per_option })
        } else {
            let tokens: Vec<_> = out
                .logprobs
                .iter()
                .flatten()
                .map(|t| {
                    let top: Vec<_> = t
                        .top
                        .iter()
                        .map(|(id, bytes, lp)| json!({ "id": id.0, "text": String::from_utf8_lossy(bytes), "logprob": lp }))
                        .collect();
                    json!({ "id": t.token.0, "text": String::from_utf8_lossy(&t.bytes), "logprob": t.logprob, "top": top })
                })
                .collect();
            json!({ "tokens": tokens })
        };
        let mut line = scores;
        line["stop"] = json!(format!("{:?}", out.stop));
        line["prompt_tokens"] = json!(out.prompt_tokens);
        line["completion_tokens"] = json!(out.tokens.len());
        writeln!(stdout, "{line}")?;
    }
    Ok(())
}
