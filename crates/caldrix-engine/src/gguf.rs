//! A reader for the GGUF header: just enough to name what is wrong with a file before
//! llama.cpp sees it (llama.cpp's loader reports every failure as a null pointer).

use std::fs::File;
use std::io::{self, BufReader, Read, Seek};
use std::path::Path;

/// What the header says about a model file.
#[derive(Debug, Clone)]
pub struct GgufHeader {
    pub version: u32,
    pub architecture: Option<String>,
    /// `<arch>.context_length`: the context window the model was trained with.
    pub context_length: Option<u64>,
    pub chat_template: Option<String>,
    pub tensor_count: u64,
    /// Where the tensor data would end, judged from the largest tensor offset (the last
    /// tensor's own size is not counted, so this is a lower bound).
    pub min_file_len: u64,
    pub file_len: u64,
    /// What the placement of layers on a device needs (`crate::device`).
    pub shape: Shape,
}

/// The sizes a placement counts: each repeating layer's tensors, the output layer's, and the
/// attention's dimensions that size a KV row.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Shape {
    /// `<arch>.block_count`.
    pub block_count: Option<u64>,
    /// Bytes of each layer's tensors (`blk.N.*`), by N, judged from the tensors' offsets.
    pub layer_bytes: Vec<u64>,
    /// Bytes of the output layer (`output.weight` and `output_norm.weight`; with tied
    /// embeddings the token embedding, which llama.cpp copies to the device for it).
    pub output_bytes: u64,
    pub embedding_length: Option<u64>,
    pub head_count: Option<u64>,
    /// The most of any layer when the model gives one per layer.
    pub head_count_kv: Option<u64>,
    pub key_length: Option<u64>,
    pub value_length: Option<u64>,
}

impl Shape {
    /// Bytes of one row of a layer's KV cache (keys and values in f16, llama.cpp's default),
    /// when the header names the attention's dimensions.
    pub fn kv_row_bytes_per_layer(&self) -> Option<u64> {
        let heads = self.head_count?.max(1);
        let kv_heads = self.head_count_kv.unwrap_or(heads);
        let head_dim = self.embedding_length? / heads;
        let (k, v) = (self.key_length.unwrap_or(head_dim), self.value_length.unwrap_or(head_dim));
        Some(kv_heads.saturating_mul(k.saturating_add(v)).saturating_mul(2))
    }
}

#[derive(Debug, thiserror::Error)]
pub enum GgufError {
    #[error("cannot read: {0}")]
    Io(io::Error),
    #[error("not a GGUF file (its first bytes are {0:?}, not \"GGUF\")")]
    BadMagic([u8; 4]),
    #[error("GGUF version {0} is not supported (2 and 3 are)")]
    BadVersion(u32),
    #[error("the file ends inside its header: it is truncated")]
    Truncated,
    #[error("malformed header: {0}")]
    Malformed(String),
}

// By hand, not `#[from]`: the message holds the cause, so it is not a `source` too (a printed
// chain would say it twice; ARCHITECTURE.md, errors).
impl From<io::Error> for GgufError {
    fn from(e: io::Error) -> Self {
        GgufError::Io(e)
    }
}

/// Architectures the pinned llama.cpp knows (its `LLM_ARCH_NAMES`, llama-cpp-sys-2 0.1.161).
pub const SUPPORTED_ARCHITECTURES: &[&str] = &[
    "llama",
    "llama4",
    "deci",
    "falcon",
    "grok",
    "gpt2",
    "gptj",
    "gptneox",
    "mpt",
    "baichuan",
    "starcoder",
    "refact",
    "bert",
    "modern-bert",
    "nomic-bert",
    "nomic-bert-moe",
    "neo-bert",
    "jina-bert-v2",
    "jina-bert-v3",
    "eurobert",
    "bloom",
    "stablelm",
    "qwen",
    "qwen2",
    "qwen2moe",
    "qwen2vl",
    "qwen3",
    "qwen3moe",
    "qwen3next",
    "qwen3vl",
    "qwen3vlmoe",
    "qwen35",
    "qwen35moe",
    "clef",
    "qwen4exp",
    "phi2",
    "phi3",
    "phimoe",
    "plamo",
    "plamo2",
    "plamo3",
    "codeshell",
    "orion",
    "internlm2",
    "minicpm",
    "minicpm3",
    "gemma",
    "gemma2",
    "gemma3",
    "gemma3n",
    "gemma4",
    "gemma4-assistant",
    "gemma-embedding",
    "starcoder2",
    "mamba",
    "mamba2",
    "maple",
    "jamba",
    "falcon-h1",
    "xverse",
    "command-r",
    "cohere2",
    "cohere2moe",
    "dbrx",
    "olmo",
    "olmo2",
    "olmoe",
    "muse-glimmer",
    "openelm",
    "arctic",
    "deepseek",
    "deepseek2",
    "deepseek2-ocr",
    "deepseek32",
    "deepseek4",
    "chatglm",
    "glm4",
    "glm4moe",
    "glm-dsa",
    "bitnet",
    "t5",
    "t5encoder",
    "jais",
    "jais2",
    "nemotron",
    "nemotron_h",
    "nemotron_h_moe",
    "exaone",
    "exaone4",
    "exaone-moe",
    "rwkv6",
    "rwkv6qwen2",
    "rwkv7",
    "arwkv7",
    "granite",
    "granitemoe",
    "granitehybrid",
    "graniteswitch",
    "granite_swa",
    "chameleon",
    "wavtokenizer-dec",
    "plm",
    "bailingmoe",
    "bailingmoe2",
    "bailingmoe3",
    "dots1",
    "dots3note",
    "arcee",
    "afmoe",
    "laguna",
    "ernie4_5",
    "ernie4_5-moe",
    "hunyuan-moe",
    "hunyuan-dense",
    "hunyuan_vl",
    "hy_v3",
    "hy_v4",
    "smollm3",
    "gpt-oss",
    "lfm2",
    "lfm2moe",
    "dream",
    "smallthinker",
    "llada",
    "llada-moe",
    "seed_oss",
    "grovemoe",
    "apertus",
    "minimax-01",
    "hrm_text",
    "minimax-m2",
    "minimax-m3",
    "cogvlm",
    "rnd1",
    "pangu-embedded",
    "mistral3",
    "eagle3",
    "dflash",
    "mistral4",
    "paddleocr",
    "mimo2",
    "step35",
    "spark2_5",
    "llama-embed",
    "maincoder",
    "kimi-linear",
    "kimi-k3",
    "glm5-next",
    "talkie",
    "mellum",
    "nanbeige",
    "qwen3tts",
    "pockettts",
];

const TYPE_STRING: u32 = 8;
const TYPE_ARRAY: u32 = 9;
/// Bounds a hostile header cannot push us past (llama.cpp has similar ones).
const MAX_STRING: u64 = 64 << 20;
const MAX_COUNT: u64 = 1 << 26;

pub fn read_header(path: &Path) -> Result<GgufHeader, GgufError> {
    let file = File::open(path)?;
    let file_len = file.metadata()?.len();
    let mut r = Reader { inner: BufReader::with_capacity(1 << 16, file) };
    let mut magic = [0u8; 4];
    r.exact(&mut magic)?;
    if &magic != b"GGUF" {
        return Err(GgufError::BadMagic(magic));
    }
    let version = r.u32()?;
    if !(2..=3).contains(&version) {
        return Err(GgufError::BadVersion(version));
    }
    let tensor_count = r.u64()?;
    let kv_count = r.u64()?;
    if tensor_count > MAX_COUNT || kv_count > MAX_COUNT {
        return Err(GgufError::Malformed(format!(
            "{tensor_count} tensors and {kv_count} keys is not plausible"
        )));
    }
    let mut header = GgufHeader {
        version,
        architecture: None,
        context_length: None,
        chat_template: None,
        tensor_count,
        min_file_len: 0,
        file_len,
        shape: Shape::default(),
    };
    let mut alignment = 32u64;
    // Keys of the form `<arch>.<name>`, kept until the architecture is known (it may come later).
    let mut by_arch = Vec::new();
    for _ in 0..kv_count {
        let key = r.string()?;
        let ty = r.u32()?;
        match (key.as_str(), ty) {
            ("general.architecture", TYPE_STRING) => header.architecture = Some(r.string()?),
            ("tokenizer.chat_template", TYPE_STRING) => header.chat_template = Some(r.string()?),
            ("general.alignment", _) => alignment = r.integer(ty)?.max(1),
            (k, _) if SHAPE_KEYS.iter().any(|name| k.ends_with(name)) => {
                let value = r.integer_or_most(ty)?;
                by_arch.push((k.to_owned(), value));
            }
            _ => r.skip_value(ty)?,
        }
    }
    let arch = header.architecture.clone().unwrap_or_default();
    let value = |name: &str| {
        by_arch.iter().find(|(k, _)| k.strip_prefix(arch.as_str()) == Some(name)).map(|(_, v)| *v)
    };
    header.context_length = value(".context_length");
    header.shape.block_count = value(".block_count");
    header.shape.embedding_length = value(".embedding_length");
    header.shape.head_count = value(".attention.head_count");
    header.shape.head_count_kv = value(".attention.head_count_kv");
    header.shape.key_length = value(".attention.key_length");
    header.shape.value_length = value(".attention.value_length");
    let mut tensors = Vec::with_capacity(tensor_count.min(1 << 16) as usize);
    for _ in 0..tensor_count {
        let name = r.string()?;
        let n_dims = r.u32()?;
        if n_dims > 8 {
            return Err(GgufError::Malformed(format!("a tensor with {n_dims} dimensions")));
        }
        for _ in 0..n_dims {
            r.u64()?;
        }
        let _ty = r.u32()?;
        tensors.push((r.u64()?, name));
    }
    let max_offset = tensors.iter().map(|(offset, _)| *offset).max().unwrap_or(0);
    let pos = r.inner.stream_position()?;
    let data_start = pos.div_ceil(alignment) * alignment;
    header.min_file_len =
        if tensor_count == 0 { pos } else { data_start.saturating_add(max_offset) };
    let data_len = file_len.saturating_sub(data_start);
    header.shape.measure_tensors(&mut tensors, data_len);
    Ok(header)
}

/// The `<arch>.` keys a placement reads.
const SHAPE_KEYS: &[&str] = &[
    ".context_length",
    ".block_count",
    ".embedding_length",
    ".attention.head_count",
    ".attention.head_count_kv",
    ".attention.key_length",
    ".attention.value_length",
];

impl Shape {
    /// Sizes each tensor by the next one's offset (the last by the data's end) and sums them
    /// by layer.
    fn measure_tensors(&mut self, tensors: &mut [(u64, String)], data_len: u64) {
        tensors.sort();
        let mut token_embd = 0;
        let mut output_weight = false;
        for (i, (offset, name)) in tensors.iter().enumerate() {
            let end = tensors.get(i + 1).map_or(data_len, |(next, _)| *next);
            let bytes = end.saturating_sub(*offset);
            let layer = name
                .strip_prefix("blk.")
                .and_then(|rest| rest.split('.').next())
                .and_then(|n| n.parse::<usize>().ok());
            match (layer, name.as_str()) {
                // Bounded by the header's count of tensors, so a hostile N cannot grow it past.
                (Some(n), _) if n < tensors.len() => {
                    if self.layer_bytes.len() <= n {
                        self.layer_bytes.resize(n + 1, 0);
                    }
                    self.layer_bytes[n] = self.layer_bytes[n].saturating_add(bytes);
                }
                (_, "output.weight") => {
                    output_weight = true;
                    self.output_bytes = self.output_bytes.saturating_add(bytes);
                }
                (_, "output_norm.weight") => {
                    self.output_bytes = self.output_bytes.saturating_add(bytes)
                }
                (_, "token_embd.weight") => token_embd = bytes,
                _ => {}
            }
        }
        if !output_weight {
            self.output_bytes = self.output_bytes.saturating_add(token_embd);
        }
    }
}

struct Reader {
    inner: BufReader<File>,
}

impl Reader {
    fn exact(&mut self, buf: &mut [u8]) -> Result<(), GgufError> {
        self.inner.read_exact(buf).map_err(|e| match e.kind() {
            io::ErrorKind::UnexpectedEof => GgufError::Truncated,
            _ => GgufError::Io(e),
        })
    }
    fn u32(&mut self) -> Result<u32, GgufError> {
        let mut b = [0u8; 4];
        self.exact(&mut b)?;
        Ok(u32::from_le_bytes(b))
    }
    fn u64(&mut self) -> Result<u64, GgufError> {
        let mut b = [0u8; 8];
        self.exact(&mut b)?;
        Ok(u64::from_le_bytes(b))
    }
    fn string(&mut self) -> Result<String, GgufError> {
        let len = self.u64()?;
        if len > MAX_STRING {
            return Err(GgufError::Malformed(format!("a string of {len} bytes")));
        }
        let mut buf = vec![0u8; len as usize];
        self.exact(&mut buf)?;
        String::from_utf8(buf)
            .map_err(|_| GgufError::Malformed("a string that is not UTF-8".into()))
    }
    fn skip(&mut self, n: u64) -> Result<(), GgufError> {
        let n = i64::try_from(n).map_err(|_| GgufError::Malformed("a huge value".into()))?;
        self.inner.seek_relative(n)?;
        Ok(())
    }
    fn integer(&mut self, ty: u32) -> Result<u64, GgufError> {
        Ok(match ty {
            0 | 1 => {
                let mut b = [0u8; 1];
                self.exact(&mut b)?;
                u64::from(b[0])
            }
            2 | 3 => {
                let mut b = [0u8; 2];
                self.exact(&mut b)?;
                u64::from(u16::from_le_bytes(b))
            }
            4 | 5 => u64::from(self.u32()?),
            10 | 11 => self.u64()?,
            _ => {
                return Err(GgufError::Malformed(format!(
                    "value type {ty} where an integer is expected"
                )));
            }
        })
    }
    /// An integer, or the largest of an array of them (a per-layer value such as
    /// `head_count_kv` in models whose layers differ).
    fn integer_or_most(&mut self, ty: u32) -> Result<u64, GgufError> {
        if ty != TYPE_ARRAY {
            return self.integer(ty);
        }
        let item = self.u32()?;
        let count = self.u64()?;
        if count > MAX_COUNT {
            return Err(GgufError::Malformed(format!("an array of {count} items")));
        }
        let mut most = 0;
        for _ in 0..count {
            most = most.max(self.integer(item)?);
        }
        Ok(most)
    }
    fn scalar_size(ty: u32) -> Option<u64> {
        match ty {
            0 | 1 | 7 => Some(1),
            2 | 3 => Some(2),
            4..=6 => Some(4),
            10..=12 => Some(8),
            _ => None,
        }
    }
    fn skip_value(&mut self, ty: u32) -> Result<(), GgufError> {
        if let Some(size) = Self::scalar_size(ty) {
            return self.skip(size);
        }
        match ty {
            TYPE_STRING => {
                let len = self.u64()?;
                self.skip(len)
            }
            TYPE_ARRAY => {
                let item = self.u32()?;
                let count = self.u64()?;
                if count > MAX_COUNT {
                    return Err(GgufError::Malformed(format!("an array of {count} items")));
                }
                if let Some(size) = Self::scalar_size(item) {
                    return self.skip(size * count);
                }
                for _ in 0..count {
                    self.skip_value(item)?;
                }
                Ok(())
            }
            _ => Err(GgufError::Malformed(format!("unknown value type {ty}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_a_file_that_is_not_gguf() {
        let dir = std::env::temp_dir().join(format!("gguf-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("not.gguf");
        std::fs::write(&path, b"PK\x03\x04 a zip, not a model").unwrap();
        assert!(matches!(read_header(&path), Err(GgufError::BadMagic(m)) if &m == b"PK\x03\x04"));
        std::fs::write(&path, b"GGUF\x03\x00\x00\x00\x01").unwrap();
        assert!(matches!(read_header(&path), Err(GgufError::Truncated)));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
