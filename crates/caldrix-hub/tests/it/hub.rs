use std::path::PathBuf;
use std::sync::atomic::Ordering;

use caldrix_hub::{Hub, HubError};

use crate::mock::MockHub;

fn bytes(seed: u8, len: usize) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect()
}

fn cache_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("caldrix-hub-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// A port nothing listens on.
fn closed_endpoint() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    drop(listener);
    format!("http://{address}")
}

#[test]
fn a_quant_is_downloaded_once_then_served_from_the_cache_offline() {
    let q4 = bytes(1, 3 << 20);
    let files = [
        ("m-Q4_0.gguf", q4.clone()),
        ("m-Q8_0.gguf", bytes(2, 1000)),
        ("README.md", b"# m".to_vec()),
    ];
    let mock = MockHub::start(&[("owner/m-GGUF", &files)]);
    let cache = cache_dir("quant");
    let hub = Hub::new(cache.clone(), mock.endpoint.clone(), false);

    let path = hub.resolve_str("owner/m-GGUF:q4_0").unwrap();
    assert!(path.starts_with(&cache), "{}", path.display());
    assert_eq!(std::fs::read(&path).unwrap(), q4);
    let after_download = mock.requests.load(Ordering::SeqCst);
    assert!(after_download >= 3, "listing, metadata and data: {after_download} requests");

    // Cached: no request, even with the hub unreachable and downloads switched off.
    assert_eq!(hub.resolve_str("hf:owner/m-GGUF:Q4_0").unwrap(), path);
    let offline = Hub::new(cache.clone(), closed_endpoint(), true);
    assert_eq!(offline.resolve_str("owner/m-GGUF:Q4_0").unwrap(), path);
    assert_eq!(mock.requests.load(Ordering::SeqCst), after_download);

    // Another file of the same repository is not cached yet: offline says so by name.
    let error = offline.resolve_str("owner/m-GGUF:Q8_0").unwrap_err();
    assert!(matches!(error, HubError::Offline { .. }), "{error}");
    let message = error.to_string();
    assert!(message.contains("owner/m-GGUF:Q8_0"), "{message}");
    assert!(message.contains(&cache.display().to_string()), "{message}");
    std::fs::remove_dir_all(cache).unwrap();
}

#[test]
fn an_unreachable_hub_names_the_reference_and_the_cache() {
    let cache = cache_dir("unreachable");
    let hub = Hub::new(cache.clone(), closed_endpoint(), false);
    let error = hub.resolve_str("owner/missing-GGUF:Q4_K_M").unwrap_err();
    assert!(matches!(error, HubError::Unreachable { .. }), "{error:?}");
    let message = error.to_string();
    assert!(message.contains("owner/missing-GGUF:Q4_K_M"), "{message}");
    assert!(message.contains(&cache.display().to_string()), "{message}");
    // A path is never looked up on the hub.
    assert_eq!(hub.resolve_str("./model.gguf").unwrap(), PathBuf::from("./model.gguf"));
}

#[test]
fn a_missing_repository_or_file_is_a_named_http_error() {
    let mock = MockHub::start(&[("owner/m-GGUF", &[("m-Q4_0.gguf", bytes(3, 10))])]);
    let cache = cache_dir("missing");
    let hub = Hub::new(cache.clone(), mock.endpoint.clone(), false);
    let message = hub.resolve_str("owner/nothing:Q4_0").unwrap_err().to_string();
    assert!(message.contains("404") && message.contains("owner/nothing"), "{message}");
    let error = hub.resolve_str("owner/m-GGUF:Q5_K_M").unwrap_err();
    let message = error.to_string();
    assert!(matches!(error, HubError::NoMatch { .. }), "{message}");
    assert!(message.contains("Q5_K_M") && message.contains("m-Q4_0.gguf"), "{message}");
    let _ = std::fs::remove_dir_all(cache);
}

#[test]
fn a_split_model_is_fetched_whole_and_its_first_part_returned() {
    let parts = [
        ("Q8_0/m-Q8_0-00001-of-00002.gguf", bytes(4, 5000)),
        ("Q8_0/m-Q8_0-00002-of-00002.gguf", bytes(5, 7000)),
    ];
    let mock = MockHub::start(&[("owner/big", &parts)]);
    let cache = cache_dir("split");
    let hub = Hub::new(cache.clone(), mock.endpoint.clone(), false);
    let first = hub.resolve_str("owner/big:Q8_0").unwrap();
    assert!(first.ends_with("Q8_0/m-Q8_0-00001-of-00002.gguf"), "{}", first.display());
    let second = first.with_file_name("m-Q8_0-00002-of-00002.gguf");
    assert_eq!(std::fs::read(second).unwrap(), parts[1].1);
    std::fs::remove_dir_all(cache).unwrap();
}

#[test]
fn a_corrupted_download_is_refused_and_removed() {
    let data = bytes(6, 100_000);
    let mock = MockHub::start(&[("owner/m", &[("m.gguf", data.clone())])]);
    let cache = cache_dir("corrupt");
    let hub = Hub::new(cache.clone(), mock.endpoint.clone(), false);
    mock.corrupt.store(true, Ordering::SeqCst);
    let error = hub.resolve_str("owner/m/m.gguf").unwrap_err();
    assert!(matches!(error, HubError::Checksum { .. }), "{error}");
    // Nothing half-right stays in the cache: the next resolve downloads again, correctly.
    mock.corrupt.store(false, Ordering::SeqCst);
    let path = hub.resolve_str("owner/m/m.gguf").unwrap();
    assert_eq!(std::fs::read(path).unwrap(), data);
    std::fs::remove_dir_all(cache).unwrap();
}
