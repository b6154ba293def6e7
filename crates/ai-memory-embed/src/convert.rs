//! A BERT sentence encoder in Hugging Face's layout (`config.json`, `tokenizer.json`,
//! `model.safetensors`, as all-MiniLM-L6-v2 ships in its Python package) written as a GGUF
//! file llama.cpp loads as architecture `bert`: the tensors renamed to llama.cpp's names, the
//! layers' matrices stored as Q8_0 (or f16), the WordPiece vocabulary in llama.cpp's phantom-space form.
//!
//! No Python and no model hub: the package is the only source these machines can reach, and
//! llama.cpp's own converter needs PyTorch.

use std::collections::BTreeMap;
use std::fs;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use serde::Deserialize;

/// The largest file read whole: all-MiniLM-L6-v2's weights are 91 MB; a base model's 440 MB.
const MAX_WEIGHTS_BYTES: u64 = 1 << 30;
const MAX_HEADER_BYTES: u64 = 16 << 20;
const ALIGNMENT: usize = 32;

/// Each message names its cause itself (no `source` chain), so a printed chain does not
/// repeat it.
#[derive(Debug, thiserror::Error)]
pub enum ConvertError {
    #[error("cannot read {path}: {error}")]
    Read { path: PathBuf, error: std::io::Error },
    #[error("cannot write {path}: {error}")]
    Write { path: PathBuf, error: std::io::Error },
    #[error("{path} is not valid: {reason}")]
    Invalid { path: PathBuf, reason: String },
    #[error("{path} is {size} bytes, more than the {MAX_WEIGHTS_BYTES} this converter reads")]
    TooLarge { path: PathBuf, size: u64 },
}

#[derive(Debug, Deserialize)]
struct Config {
    model_type: String,
    hidden_size: u32,
    intermediate_size: u32,
    num_hidden_layers: u32,
    num_attention_heads: u32,
    max_position_embeddings: u32,
    layer_norm_eps: f32,
    #[serde(default = "default_type_vocab")]
    type_vocab_size: u32,
    vocab_size: u32,
    #[serde(default = "default_act")]
    hidden_act: String,
    #[serde(default = "default_position")]
    position_embedding_type: String,
}

fn default_type_vocab() -> u32 {
    2
}
fn default_act() -> String {
    "gelu".to_owned()
}
fn default_position() -> String {
    "absolute".to_owned()
}

#[derive(Debug, Deserialize)]
struct Tokenizer {
    model: WordPiece,
    #[serde(default)]
    normalizer: Option<Normalizer>,
    #[serde(default)]
    added_tokens: Vec<AddedToken>,
}

#[derive(Debug, Deserialize)]
struct WordPiece {
    #[serde(rename = "type")]
    kind: String,
    vocab: BTreeMap<String, u32>,
    #[serde(default = "default_prefix")]
    continuing_subword_prefix: String,
}

fn default_prefix() -> String {
    "##".to_owned()
}

#[derive(Debug, Deserialize)]
struct Normalizer {
    #[serde(default)]
    lowercase: bool,
    #[serde(default)]
    strip_accents: Option<bool>,
}

#[derive(Debug, Deserialize)]
struct AddedToken {
    id: u32,
    #[serde(default)]
    special: bool,
}

#[derive(Debug, Deserialize)]
struct TensorEntry {
    dtype: String,
    shape: Vec<u64>,
    data_offsets: [u64; 2],
}

/// What a converted model is, for the caller's log.
#[derive(Debug, Clone, PartialEq)]
pub struct Converted {
    pub tensors: usize,
    pub vocabulary: usize,
    pub dimension: u32,
}

/// Converts the model in `dir` and writes the GGUF file to `out` (through a temporary file
/// beside it, so a half-written model is never found at `out`).
/// The matrices as Q8_0: against f16, 20% faster per window and per query on 2 cores, and
/// within a cosine of 0.9996 of f16's vectors (`cargo bench -p ai-memory-embed --bench embed`);
/// both agree with the reference encoder above 0.999.
pub fn convert(dir: &Path, out: &Path) -> Result<Converted, ConvertError> {
    convert_as(dir, out, Matrices::Q8)
}

/// How the layers' matrices are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Matrices {
    F16,
    /// ggml's Q8_0: blocks of 32 int8 values with an f16 scale.
    Q8,
}

/// `convert`, with the matrices stored as `matrices` says.
pub fn convert_as(dir: &Path, out: &Path, matrices: Matrices) -> Result<Converted, ConvertError> {
    let config: Config = read_json(&dir.join("config.json"))?;
    let tok_path = dir.join("tokenizer.json");
    let tokenizer: Tokenizer = read_json(&tok_path)?;
    let config_path = dir.join("config.json");
    let invalid =
        |path: &Path, reason: String| ConvertError::Invalid { path: path.to_owned(), reason };
    if config.model_type != "bert" {
        return Err(invalid(
            &config_path,
            format!("model_type is `{}`, not `bert`", config.model_type),
        ));
    }
    if config.hidden_act != "gelu" || config.position_embedding_type != "absolute" {
        return Err(invalid(
            &config_path,
            format!(
                "hidden_act `{}` with `{}` positions; llama.cpp's bert takes gelu with absolute positions",
                config.hidden_act, config.position_embedding_type
            ),
        ));
    }
    if config.num_attention_heads == 0
        || !config.hidden_size.is_multiple_of(config.num_attention_heads)
    {
        return Err(invalid(
            &config_path,
            "hidden_size is not a multiple of num_attention_heads".into(),
        ));
    }
    if tokenizer.model.kind != "WordPiece" {
        return Err(invalid(
            &tok_path,
            format!("model type `{}`, not WordPiece", tokenizer.model.kind),
        ));
    }
    let tokens = vocabulary(&tokenizer, config.vocab_size).map_err(|r| invalid(&tok_path, r))?;
    let weights_path = dir.join("model.safetensors");
    let tensors = read_tensors(&weights_path, &config, matrices)?;

    let mut kv = Vec::new();
    let arch = "bert";
    kv.push(("general.architecture".to_owned(), Value::Str(arch.to_owned())));
    kv.push(("general.name".to_owned(), Value::Str(model_name(dir))));
    kv.push((format!("{arch}.context_length"), Value::U32(config.max_position_embeddings)));
    kv.push((format!("{arch}.embedding_length"), Value::U32(config.hidden_size)));
    kv.push((format!("{arch}.feed_forward_length"), Value::U32(config.intermediate_size)));
    kv.push((format!("{arch}.block_count"), Value::U32(config.num_hidden_layers)));
    kv.push((format!("{arch}.attention.head_count"), Value::U32(config.num_attention_heads)));
    kv.push((format!("{arch}.attention.layer_norm_epsilon"), Value::F32(config.layer_norm_eps)));
    kv.push((format!("{arch}.attention.causal"), Value::Bool(false)));
    // Mean pooling, as the sentence-transformers model's `1_Pooling/config.json` says.
    kv.push((format!("{arch}.pooling_type"), Value::U32(1)));
    kv.push(("tokenizer.ggml.model".to_owned(), Value::Str("bert".to_owned())));
    let vocabulary = tokens.len();
    let types: Vec<i32> = tokens.iter().map(|(_, kind)| *kind).collect();
    kv.push((
        "tokenizer.ggml.tokens".to_owned(),
        Value::StrArray(tokens.into_iter().map(|(t, _)| t).collect()),
    ));
    kv.push(("tokenizer.ggml.token_type".to_owned(), Value::I32Array(types)));
    kv.push(("tokenizer.ggml.token_type_count".to_owned(), Value::U32(config.type_vocab_size)));
    let lowercase = tokenizer.normalizer.as_ref().is_some_and(|n| n.lowercase);
    kv.push(("tokenizer.ggml.normalizer.lowercase".to_owned(), Value::Bool(lowercase)));
    // Hugging Face's BertNormalizer strips accents when lowercasing unless told otherwise.
    let strip = tokenizer.normalizer.as_ref().and_then(|n| n.strip_accents).unwrap_or(lowercase);
    kv.push(("tokenizer.ggml.normalizer.strip_accents".to_owned(), Value::Bool(strip)));
    kv.push(("tokenizer.ggml.add_bos_token".to_owned(), Value::Bool(true)));
    kv.push(("tokenizer.ggml.add_sep_token".to_owned(), Value::Bool(true)));

    let count = tensors.len();
    write_gguf(out, &kv, &tensors)?;
    Ok(Converted { tensors: count, vocabulary, dimension: config.hidden_size })
}

fn model_name(dir: &Path) -> String {
    dir.file_name().map_or_else(|| "bert".to_owned(), |n| n.to_string_lossy().into_owned())
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, ConvertError> {
    let text =
        fs::read(path).map_err(|error| ConvertError::Read { path: path.to_owned(), error })?;
    serde_json::from_slice(&text)
        .map_err(|e| ConvertError::Invalid { path: path.to_owned(), reason: e.to_string() })
}

/// The vocabulary in id order, in llama.cpp's form: a word-initial piece gets the phantom
/// space `▁`, a continuation loses its `##`, a bracketed special token stays as it is.
fn vocabulary(tokenizer: &Tokenizer, size: u32) -> Result<Vec<(String, i32)>, String> {
    const NORMAL: i32 = 1;
    const CONTROL: i32 = 3;
    let mut tokens: Vec<Option<(String, i32)>> = vec![None; size as usize];
    let prefix = tokenizer.model.continuing_subword_prefix.as_str();
    for (text, &id) in &tokenizer.model.vocab {
        let slot = tokens.get_mut(id as usize).ok_or_else(|| {
            format!("token {text:?} has id {id}, outside the vocabulary of {size}")
        })?;
        let piece = if text.starts_with('[') && text.ends_with(']') {
            text.clone()
        } else if let Some(rest) = text.strip_prefix(prefix) {
            rest.to_owned()
        } else {
            format!("\u{2581}{text}")
        };
        if slot.replace((piece, NORMAL)).is_some() {
            return Err(format!("two tokens have id {id}"));
        }
    }
    for added in &tokenizer.added_tokens {
        if added.special
            && let Some(Some((_, kind))) = tokens.get_mut(added.id as usize)
        {
            *kind = CONTROL;
        }
    }
    tokens
        .into_iter()
        .enumerate()
        .map(|(id, t)| t.ok_or_else(|| format!("no token has id {id}")))
        .collect()
}

struct Tensor {
    name: String,
    /// llama.cpp's order: the innermost dimension first.
    dims: Vec<u64>,
    data: TensorData,
}

enum TensorData {
    F32(Vec<f32>),
    F16(Vec<u16>),
    /// Q8_0 blocks, already in their byte layout.
    Q8(Vec<u8>),
}

/// ggml's Q8_0 of `values` (a multiple of 32 long): each block of 32 is its f16 scale
/// `max |x| / 127`, then the 32 values divided by it, rounded, as int8.
fn q8_0(values: &[f32]) -> Vec<u8> {
    let mut out = Vec::with_capacity(values.len() / 32 * 34);
    for block in values.chunks_exact(32) {
        let amax = block.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        let d = amax / 127.0;
        let inv = if d > 0.0 { 1.0 / d } else { 0.0 };
        out.extend(f16_bits(d).to_le_bytes());
        out.extend(block.iter().map(|v| (v * inv).round().clamp(-127.0, 127.0) as i8 as u8));
    }
    out
}

impl TensorData {
    fn ggml_type(&self) -> u32 {
        match self {
            TensorData::F32(_) => 0,
            TensorData::F16(_) => 1,
            TensorData::Q8(_) => 8,
        }
    }
    fn byte_len(&self) -> usize {
        match self {
            TensorData::F32(v) => v.len() * 4,
            TensorData::F16(v) => v.len() * 2,
            TensorData::Q8(v) => v.len(),
        }
    }
}

/// llama.cpp's name for a tensor of Hugging Face's BertModel, or `None` for one it does not
/// use (the pooler, the position ids).
fn gguf_name(name: &str) -> Option<String> {
    let name = name.strip_prefix("bert.").unwrap_or(name);
    let fixed = match name {
        "embeddings.word_embeddings.weight" => Some("token_embd.weight"),
        "embeddings.position_embeddings.weight" => Some("position_embd.weight"),
        "embeddings.token_type_embeddings.weight" => Some("token_types.weight"),
        "embeddings.LayerNorm.weight" => Some("token_embd_norm.weight"),
        "embeddings.LayerNorm.bias" => Some("token_embd_norm.bias"),
        _ => None,
    };
    if let Some(fixed) = fixed {
        return Some(fixed.to_owned());
    }
    let rest = name.strip_prefix("encoder.layer.")?;
    let (layer, rest) = rest.split_once('.')?;
    let layer: u32 = layer.parse().ok()?;
    let (module, param) = rest.rsplit_once('.')?;
    let part = match module {
        "attention.self.query" => "attn_q",
        "attention.self.key" => "attn_k",
        "attention.self.value" => "attn_v",
        "attention.output.dense" => "attn_output",
        "attention.output.LayerNorm" => "attn_output_norm",
        "intermediate.dense" => "ffn_up",
        "output.dense" => "ffn_down",
        "output.LayerNorm" => "layer_output_norm",
        _ => return None,
    };
    matches!(param, "weight" | "bias").then(|| format!("blk.{layer}.{part}.{param}"))
}

fn read_tensors(
    path: &Path,
    config: &Config,
    matrices: Matrices,
) -> Result<Vec<Tensor>, ConvertError> {
    let invalid = |reason: String| ConvertError::Invalid { path: path.to_owned(), reason };
    let size = fs::metadata(path)
        .map_err(|error| ConvertError::Read { path: path.to_owned(), error })?
        .len();
    if size > MAX_WEIGHTS_BYTES {
        return Err(ConvertError::TooLarge { path: path.to_owned(), size });
    }
    let bytes =
        fs::read(path).map_err(|error| ConvertError::Read { path: path.to_owned(), error })?;
    let header_len = bytes
        .get(..8)
        .map(|b| u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]))
        .ok_or_else(|| invalid("shorter than its header".into()))?;
    if header_len > MAX_HEADER_BYTES || 8 + header_len > size {
        return Err(invalid(format!("header of {header_len} bytes does not fit the file")));
    }
    let header_end = 8 + header_len as usize;
    let header: BTreeMap<String, serde_json::Value> = serde_json::from_slice(&bytes[8..header_end])
        .map_err(|e| invalid(format!("header: {e}")))?;
    let data = &bytes[header_end..];
    let mut tensors = Vec::new();
    for (name, entry) in header {
        if name == "__metadata__" {
            continue;
        }
        let Some(gguf) = gguf_name(&name) else { continue };
        let entry: TensorEntry =
            serde_json::from_value(entry).map_err(|e| invalid(format!("tensor {name}: {e}")))?;
        if entry.dtype != "F32" {
            return Err(invalid(format!(
                "tensor {name} is {}, this converter reads F32",
                entry.dtype
            )));
        }
        let count: u64 = entry.shape.iter().product();
        let [start, end] = entry.data_offsets;
        if end < start || end - start != count * 4 || end as usize > data.len() {
            return Err(invalid(format!("tensor {name}'s offsets do not match its shape")));
        }
        let values: Vec<f32> = data[start as usize..end as usize]
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        let dims: Vec<u64> = entry.shape.iter().rev().copied().collect();
        // Matrices as Q8_0 or f16; vectors (norms, biases) and
        // the embedding tables stay f32: they are read by row, not multiplied.
        let matrix = dims.len() == 2 && gguf.starts_with("blk.");
        let data = if matrix && matrices == Matrices::Q8 && dims[0].is_multiple_of(32) {
            TensorData::Q8(q8_0(&values))
        } else if matrix {
            TensorData::F16(values.iter().map(|&v| f16_bits(v)).collect())
        } else {
            TensorData::F32(values)
        };
        tensors.push(Tensor { name: gguf, dims, data });
    }
    let expected = 5 + 16 * config.num_hidden_layers as usize;
    if tensors.len() != expected {
        return Err(invalid(format!(
            "{} of the tensors a {}-layer BertModel needs were found, {expected} expected",
            tensors.len(),
            config.num_hidden_layers
        )));
    }
    Ok(tensors)
}

/// IEEE 754 binary16 of `v`, rounded to nearest even.
pub(crate) fn f16_bits(v: f32) -> u16 {
    let bits = v.to_bits();
    let sign = ((bits >> 16) & 0x8000) as u16;
    let exp = ((bits >> 23) & 0xff) as i32;
    let man = bits & 0x007f_ffff;
    if exp == 0xff {
        // Infinity or NaN (a NaN keeps a payload bit).
        return sign | 0x7c00 | if man != 0 { 0x200 } else { 0 };
    }
    let e = exp - 127 + 15;
    if e >= 0x1f {
        return sign | 0x7c00;
    }
    if e <= 0 {
        if e < -10 {
            return sign;
        }
        let man = man | 0x0080_0000;
        let shift = (14 - e) as u32;
        let half = 1u32 << (shift - 1);
        let rest = man & ((1u32 << shift) - 1);
        let mut out = (man >> shift) as u16;
        if rest > half || (rest == half && out & 1 == 1) {
            out += 1;
        }
        return sign | out;
    }
    let mut out = ((e as u32) << 10 | (man >> 13)) as u16;
    let rest = man & 0x1fff;
    if rest > 0x1000 || (rest == 0x1000 && out & 1 == 1) {
        // A carry into the exponent is the right rounding, up to infinity.
        out += 1;
    }
    sign | out
}

enum Value {
    U32(u32),
    F32(f32),
    Bool(bool),
    Str(String),
    StrArray(Vec<String>),
    I32Array(Vec<i32>),
}

fn write_gguf(out: &Path, kv: &[(String, Value)], tensors: &[Tensor]) -> Result<(), ConvertError> {
    fn string(b: &mut Vec<u8>, s: &str) {
        b.extend((s.len() as u64).to_le_bytes());
        b.extend_from_slice(s.as_bytes());
    }
    // Everything before the tensor data, whose length decides where the data starts.
    let mut head = Vec::new();
    head.extend(b"GGUF");
    head.extend(3u32.to_le_bytes());
    head.extend((tensors.len() as u64).to_le_bytes());
    head.extend((kv.len() as u64).to_le_bytes());
    for (key, value) in kv {
        string(&mut head, key);
        match value {
            Value::U32(v) => {
                head.extend(4u32.to_le_bytes());
                head.extend(v.to_le_bytes());
            }
            Value::F32(v) => {
                head.extend(6u32.to_le_bytes());
                head.extend(v.to_le_bytes());
            }
            Value::Bool(v) => {
                head.extend(7u32.to_le_bytes());
                head.push(u8::from(*v));
            }
            Value::Str(s) => {
                head.extend(8u32.to_le_bytes());
                string(&mut head, s);
            }
            Value::StrArray(items) => {
                head.extend(9u32.to_le_bytes());
                head.extend(8u32.to_le_bytes());
                head.extend((items.len() as u64).to_le_bytes());
                items.iter().for_each(|s| string(&mut head, s));
            }
            Value::I32Array(items) => {
                head.extend(9u32.to_le_bytes());
                head.extend(5u32.to_le_bytes());
                head.extend((items.len() as u64).to_le_bytes());
                items.iter().for_each(|v| head.extend(v.to_le_bytes()));
            }
        }
    }
    let mut offset = 0usize;
    for t in tensors {
        string(&mut head, &t.name);
        head.extend((t.dims.len() as u32).to_le_bytes());
        t.dims.iter().for_each(|d| head.extend(d.to_le_bytes()));
        head.extend(t.data.ggml_type().to_le_bytes());
        head.extend((offset as u64).to_le_bytes());
        offset = (offset + t.data.byte_len()).next_multiple_of(ALIGNMENT);
    }
    head.resize(head.len().next_multiple_of(ALIGNMENT), 0);

    let tmp = out.with_extension("gguf.partial");
    let werr = |error| ConvertError::Write { path: tmp.clone(), error };
    let mut w = BufWriter::new(fs::File::create(&tmp).map_err(werr)?);
    w.write_all(&head).map_err(werr)?;
    for t in tensors {
        let mut b = Vec::with_capacity(t.data.byte_len().next_multiple_of(ALIGNMENT));
        match &t.data {
            TensorData::F32(v) => v.iter().for_each(|x| b.extend(x.to_le_bytes())),
            TensorData::F16(v) => v.iter().for_each(|x| b.extend(x.to_le_bytes())),
            TensorData::Q8(v) => b.extend_from_slice(v),
        }
        b.resize(b.len().next_multiple_of(ALIGNMENT), 0);
        w.write_all(&b).map_err(werr)?;
    }
    let file = w.into_inner().map_err(|e| werr(e.into_error()))?;
    file.sync_all().map_err(werr)?;
    fs::rename(&tmp, out).map_err(|error| ConvertError::Write { path: out.to_owned(), error })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_file_is_named_with_its_cause_said_once() {
        let dir = std::env::temp_dir().join("ai-memory-embed-no-such-dir");
        let e = convert(&dir, &dir.join("out.gguf")).unwrap_err();
        let text = e.to_string();
        assert!(text.contains("config.json") && text.contains("os error 2"), "{text}");
        // A chain printed by the binary (`{:#}`) adds nothing the message does not say.
        assert!(std::error::Error::source(&e).is_none());
    }

    #[test]
    fn f16_rounds_like_ieee() {
        assert_eq!(f16_bits(0.0), 0);
        assert_eq!(f16_bits(-0.0), 0x8000);
        assert_eq!(f16_bits(1.0), 0x3c00);
        assert_eq!(f16_bits(-2.0), 0xc000);
        assert_eq!(f16_bits(65504.0), 0x7bff);
        assert_eq!(f16_bits(70000.0), 0x7c00);
        assert_eq!(f16_bits(f32::INFINITY), 0x7c00);
        assert_eq!(f16_bits(f32::NAN) & 0x7c00, 0x7c00);
        assert_ne!(f16_bits(f32::NAN) & 0x3ff, 0);
        // The smallest subnormal, and a value halfway to it that rounds to even (zero).
        assert_eq!(f16_bits(5.960_464_5e-8), 1);
        assert_eq!(f16_bits(2.980_232_2e-8), 0);
        // 1 + 2^-11 lies halfway between 1 and the next f16: ties to even, down.
        assert_eq!(f16_bits(1.0 + 2f32.powi(-11)), 0x3c00);
        assert_eq!(f16_bits(1.0 + 3.0 * 2f32.powi(-11)), 0x3c02);
        assert_eq!(f16_bits(0.1), 0x2e66);
    }

    #[test]
    fn q8_0_blocks_are_a_scale_and_32_rounded_values() {
        let mut values: Vec<f32> = (0..32).map(|i| i as f32 - 16.0).collect();
        values[5] = 127.0;
        let b = q8_0(&values);
        assert_eq!(b.len(), 34);
        assert_eq!(u16::from_le_bytes([b[0], b[1]]), f16_bits(1.0));
        assert_eq!(b[2] as i8, -16);
        assert_eq!(b[2 + 5] as i8, 127);
        assert_eq!(q8_0(&[0.0; 32])[2..], [0u8; 32]);
    }

    #[test]
    fn tensor_names_follow_llama_cpp() {
        assert_eq!(
            gguf_name("embeddings.word_embeddings.weight").as_deref(),
            Some("token_embd.weight")
        );
        assert_eq!(
            gguf_name("bert.embeddings.LayerNorm.bias").as_deref(),
            Some("token_embd_norm.bias")
        );
        assert_eq!(
            gguf_name("encoder.layer.5.attention.output.LayerNorm.weight").as_deref(),
            Some("blk.5.attn_output_norm.weight")
        );
        assert_eq!(
            gguf_name("encoder.layer.0.output.dense.bias").as_deref(),
            Some("blk.0.ffn_down.bias")
        );
        assert_eq!(gguf_name("pooler.dense.weight"), None);
        assert_eq!(gguf_name("embeddings.position_ids"), None);
    }

    #[test]
    fn vocabulary_takes_the_phantom_space_form() {
        let tok: Tokenizer = serde_json::from_value(serde_json::json!({
            "model": {"type": "WordPiece", "vocab": {"[PAD]": 0, "car": 1, "##s": 2}},
            "added_tokens": [{"id": 0, "special": true}]
        }))
        .unwrap();
        let v = vocabulary(&tok, 3).unwrap();
        assert_eq!(v, vec![("[PAD]".into(), 3), ("\u{2581}car".into(), 1), ("s".into(), 1)]);
        assert!(vocabulary(&tok, 4).unwrap_err().contains("no token has id 3"));
        assert!(vocabulary(&tok, 2).unwrap_err().contains("outside the vocabulary"));
    }
}
