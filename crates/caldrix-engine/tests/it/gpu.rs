//! The Vulkan build on a device: in CI, Mesa's software Vulkan driver (lavapipe), which ggml
//! lists only with `GGML_VK_VISIBLE_DEVICES=0` (scripts/test sets it). Its kernels are not the
//! CPU backend's, so the comparison is what can honestly be compared: the top token and the
//! leading logits within a stated tolerance, not whole greedy texts (they split after a few
//! tokens, as the CPU backend's own instruction-set variants do).

use std::io::Write;
use std::sync::OnceLock;

use caldrix_engine::device::{DEVICE_HEADROOM_BYTES, gpu_devices};
use caldrix_engine::{
    Constraint, EngineError, GenerateParams, Model, ModelParams, Sampling, SessionParams,
    StopReason,
};

use crate::support;

/// The most a leading token's log-probability (the CPU's ten likeliest) may differ on the
/// device, and a resumed prefix's logits from a cold prefill's, in nats. Measured on lavapipe
/// (LLVM 15, 256-bit) with SmolLM2 Q4_1: 0.12 and 0.22 on the two prompts here, 0.29 resumed.
const MAX_DIFF: f32 = 0.75;

/// Short prompts, plain text: lavapipe computes about 2 tokens a second, prefill or decode.
fn tokens(model: &Model, text: &str) -> Vec<caldrix_engine::Token> {
    model.tokenize_prompt(text)
}

fn on_device() -> &'static Model {
    static M: OnceLock<Model> = OnceLock::new();
    M.get_or_init(|| {
        // Auto: as many layers as fit, which on any device is all of SmolLM2's.
        Model::load(&support::model_path(support::SMOLLM2), &ModelParams::default())
            .expect("SmolLM2 loads on the device")
    })
}

fn session(model: &Model) -> caldrix_engine::Session<'_> {
    model
        .session(&SessionParams { n_ctx: Some(1024), threads: Some(2), ..SessionParams::default() })
        .expect("a session opens")
}

fn log_softmax(v: &[f32]) -> Vec<f32> {
    let max = v.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let z = max + v.iter().map(|x| (x - max).exp()).sum::<f32>().ln();
    v.iter().map(|x| x - z).collect()
}

fn argmax(v: &[f32]) -> usize {
    v.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1)).map_or(0, |(i, _)| i)
}

#[test]
fn a_device_is_found_and_auto_places_every_layer_on_it() {
    let devices = gpu_devices();
    assert!(!devices.is_empty(), "no Vulkan device (is GGML_VK_VISIBLE_DEVICES=0 set?)");
    let placement = on_device().placement();
    let device = placement.device.as_ref().expect("the layers went to a device");
    assert_eq!(device.name, devices[0].name);
    assert!(placement.on_gpu());
    assert_eq!(placement.layers, placement.total_layers, "{placement:?}");
    assert!(placement.device_weight_bytes > 50 << 20, "{placement:?}");
    eprintln!("{}", placement.describe());
    // The CPU's copy is the CPU's.
    assert!(!support::smollm2().placement().on_gpu());
}

#[test]
fn the_device_agrees_with_the_cpu_on_the_top_token_and_the_leading_log_probabilities() {
    let prompts = ["fn main() { println!(\"hello", "The capital of France is"];
    let _guard = support::lock();
    for user in prompts {
        let prompt = tokens(support::smollm2(), user);
        let cpu = log_softmax(&support::session(support::smollm2()).evaluate(&prompt).unwrap());
        let gpu = log_softmax(&session(on_device()).evaluate(&prompt).unwrap());
        assert_eq!(argmax(&cpu), argmax(&gpu), "the top token differs for {user:?}");
        let mut leading: Vec<usize> = (0..cpu.len()).collect();
        leading.sort_by(|&a, &b| cpu[b].total_cmp(&cpu[a]));
        let diff = leading[..10].iter().map(|&t| (cpu[t] - gpu[t]).abs()).fold(0.0, f32::max);
        eprintln!("{user:?}: the ten leading log-probabilities differ by at most {diff:.3}");
        assert!(diff <= MAX_DIFF, "{user:?}: a leading log-probability differs by {diff}");
    }
}

#[test]
fn a_json_generation_on_the_device_is_valid() {
    let schema = serde_json::json!({
        "type": "object",
        "properties": {
            "done": {"type": "boolean"},
            "files": {"type": "integer", "minimum": 0, "maximum": 99}
        },
        "required": ["done", "files"],
        "additionalProperties": false
    });
    let validator = jsonschema::validator_for(&schema).unwrap();
    let model = on_device();
    let prompt = tokens(model, "Status as JSON:");
    let params = GenerateParams {
        max_new_tokens: 40,
        sampling: Sampling::Greedy,
        constraint: Constraint::Json(schema),
        ..GenerateParams::default()
    };
    let _guard = support::lock();
    let out = session(model).generate(&prompt, &params).unwrap();
    assert_ne!(out.stop, StopReason::MaxTokens, "ran out of tokens: {}", out.text);
    let value: serde_json::Value = serde_json::from_str(&out.text).unwrap();
    assert!(validator.is_valid(&value), "{value}");
}

#[test]
fn a_prefix_resumed_on_the_device_continues_as_a_cold_prefill_does() {
    let model = on_device();
    let prompt = tokens(model, "Run the tests after every change, and keep answers short:");
    let cut = prompt.len() * 2 / 3;
    let _guard = support::lock();
    let cold = session(model).evaluate(&prompt).unwrap();
    let mut first = session(model);
    first.evaluate(&prompt[..cut]).unwrap();
    let snapshot = first.snapshot(cut).unwrap();
    drop(first);
    let mut resumed = session(model);
    resumed.restore(&snapshot).unwrap();
    assert_eq!(resumed.cached_tokens(), &prompt[..cut]);
    let warm = resumed.evaluate(&prompt).unwrap();
    assert_eq!(argmax(&cold), argmax(&warm));
    let diff = cold.iter().zip(&warm).map(|(a, b)| (a - b).abs()).fold(0.0, f32::max);
    eprintln!("resumed on the device: logits within {diff:.4} of a cold prefill");
    assert!(diff <= MAX_DIFF, "the resumed logits differ by {diff}");
}

/// A GGUF header describing a llama of `layers` layers of `layer_bytes` each, its tensor data a
/// hole (the placement reads the header only, and the load is refused before any weight).
fn sparse_gguf(path: &std::path::Path, layers: u64, layer_bytes: u64) {
    fn string(out: &mut Vec<u8>, s: &str) {
        out.extend((s.len() as u64).to_le_bytes());
        out.extend(s.as_bytes());
    }
    let mut out = b"GGUF".to_vec();
    out.extend(3u32.to_le_bytes());
    out.extend((layers + 1).to_le_bytes()); // tensors: one a layer and token_embd
    let keys: [(&str, u32); 5] = [
        ("llama.block_count", layers as u32),
        ("llama.context_length", 4096),
        ("llama.embedding_length", 4096),
        ("llama.attention.head_count", 32),
        ("llama.attention.head_count_kv", 8),
    ];
    out.extend((keys.len() as u64 + 1).to_le_bytes());
    string(&mut out, "general.architecture");
    out.extend(8u32.to_le_bytes());
    string(&mut out, "llama");
    for (key, value) in keys {
        string(&mut out, key);
        out.extend(4u32.to_le_bytes());
        out.extend(value.to_le_bytes());
    }
    let mut offset = 0u64;
    for i in 0..=layers {
        let name =
            if i == layers { "token_embd.weight".to_owned() } else { format!("blk.{i}.ffn") };
        string(&mut out, &name);
        out.extend(1u32.to_le_bytes());
        out.extend((layer_bytes * 2).to_le_bytes()); // F16 elements
        out.extend(1u32.to_le_bytes()); // F16
        out.extend(offset.to_le_bytes());
        offset += layer_bytes;
    }
    let data_start = (out.len() as u64).div_ceil(32) * 32;
    let mut file = std::fs::File::create(path).unwrap();
    file.write_all(&out).unwrap();
    file.set_len(data_start + offset).unwrap();
}

#[test]
fn an_explicit_count_past_the_device_memory_is_refused_with_the_figures() {
    let device = gpu_devices().into_iter().next().expect("a device");
    // Four layers, each more than half the device: two cannot fit, one does on an idle device.
    let layer_bytes = (device.total_bytes / 2 + (1 << 30)) & !0xFFFF;
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("gpu-fit");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("huge.gguf");
    sparse_gguf(&path, 4, layer_bytes);
    let asked = ModelParams { gpu_layers: Some(2), ..ModelParams::default() };
    let err = Model::load(&path, &asked).unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, EngineError::Place(_)), "{text}");
    let weights = (2 * layer_bytes) >> 20;
    for figure in [
        format!("2 of 5 layers on {}", device.name),
        format!("weights {weights} MiB"),
        format!("{} MiB for compute", DEVICE_HEADROOM_BYTES >> 20),
        format!("free of {} MiB", device.total_bytes >> 20),
    ] {
        assert!(text.contains(&figure), "`{figure}` missing from: {text}");
    }
    // Auto offloads none of it and says so in the placement, not in a refusal.
    let plan = Model::plan(&path, &ModelParams::default()).unwrap();
    assert!(plan.layers <= 1, "{plan:?}");
    std::fs::remove_file(&path).unwrap();
}
