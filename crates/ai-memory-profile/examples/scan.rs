//! Shows what the harvester makes of each argument: the statements it keeps (with their
//! topic key) and the sentences it skips, with why. `cargo run --example scan -- "text"`.

fn main() {
    for arg in std::env::args().skip(1) {
        for r in ai_memory_profile::sentence::scan(&arg) {
            match r {
                Ok(s) => println!(
                    "kept {:?}: general {}, key `{}`, {:?}",
                    s.text,
                    s.general,
                    s.topic.key(),
                    s.topic
                ),
                Err((text, why)) => println!("skip {why:?}: {text:?}"),
            }
        }
    }
}
