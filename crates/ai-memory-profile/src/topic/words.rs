//! Words shared by the harvest (`sentence`) and topics: folding, tokens, verb forms and the
//! marker, scope and stop lists. Kept in one place so a word the harvest takes as a marker is the
//! same word a topic drops from its terms.

/// One whitespace-separated token of a sentence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Token {
    /// Lowercase, ASCII-folded, surrounding punctuation dropped (`tests/suite`, `c++` whole).
    pub(crate) text: String,
    /// As written, punctuation dropped (file names are matched case-sensitively).
    pub(crate) raw: String,
    /// Written in inline code: a literal name, never a marker or a verb.
    pub(crate) code: bool,
    /// The previous token ended with a comma (the ", not Y" shape).
    pub(crate) after_comma: bool,
    /// This token ended with a comma ("No, use pnpm" does not forbid anything).
    pub(crate) comma: bool,
    /// Written with a leading capital ("Go" the language against "go" the verb).
    pub(crate) capital: bool,
}

const LEAD: &[char] = &['(', '[', '{', '"', '\'', '`', '*', '<', '“', '‘', '«', '¿', '¡'];
const TRAIL: &[char] =
    &['.', ',', ';', ':', '!', '?', ')', ']', '}', '"', '\'', '`', '*', '>', '”', '’', '»'];

/// Lowercase with Portuguese (and other Latin) accents folded, so "não" and "nao" are one word.
pub(crate) fn fold(s: &str) -> String {
    s.chars()
        .flat_map(char::to_lowercase)
        .map(|c| match c {
            'á' | 'à' | 'â' | 'ã' | 'ä' | 'å' => 'a',
            'é' | 'è' | 'ê' | 'ë' => 'e',
            'í' | 'ì' | 'î' | 'ï' => 'i',
            'ó' | 'ò' | 'ô' | 'õ' | 'ö' => 'o',
            'ú' | 'ù' | 'û' | 'ü' => 'u',
            'ç' => 'c',
            'ñ' => 'n',
            '\u{2018}' | '\u{2019}' => '\'',
            c => c,
        })
        .collect()
}

/// The tokens of a sentence; pure punctuation is dropped.
pub(crate) fn tokens(s: &str) -> Vec<Token> {
    let mut out = Vec::new();
    let mut in_code = false;
    let mut after_comma = false;
    for piece in s.split_whitespace() {
        let code = in_code || piece.starts_with('`');
        if piece.matches('`').count() % 2 == 1 {
            in_code = !in_code;
        }
        let comma = piece.trim_end_matches(|c| c != ',' && TRAIL.contains(&c)).ends_with(',');
        let prev_comma = std::mem::replace(&mut after_comma, comma);
        let word = piece.trim_start_matches(LEAD).trim_end_matches(TRAIL);
        if !word.chars().any(char::is_alphanumeric) {
            continue;
        }
        out.push(Token {
            text: fold(word),
            raw: word.to_owned(),
            code,
            after_comma: prev_comma,
            comma,
            capital: word.chars().next().is_some_and(char::is_uppercase),
        });
    }
    out
}

/// Whether the words of `phrase` (space-separated, folded) start at token `i`.
pub(crate) fn phrase_at(toks: &[Token], i: usize, phrase: &str) -> bool {
    phrase
        .split(' ')
        .enumerate()
        .all(|(k, w)| toks.get(i + k).is_some_and(|t| !t.code && t.text == w))
}

pub(crate) fn has_phrase(toks: &[Token], phrases: &[&str]) -> bool {
    (0..toks.len()).any(|i| phrases.iter().any(|p| phrase_at(toks, i, p)))
}

/// Which tokens belong to one of `phrases` (the longest phrase at a position wins).
pub(crate) fn phrase_mask(toks: &[Token], phrases: &[&str]) -> Vec<bool> {
    let mut mask = vec![false; toks.len()];
    let mut i = 0;
    while i < toks.len() {
        let len = phrases
            .iter()
            .filter(|p| phrase_at(toks, i, p))
            .map(|p| p.split(' ').count())
            .max()
            .unwrap_or(0);
        for m in mask.iter_mut().skip(i).take(len) {
            *m = true;
        }
        i += len.max(1);
    }
    mask
}

/// Phrases that scope a statement beyond the project it was said in.
pub(crate) const GENERAL: &[&str] = &[
    "in all my projects",
    "in all of my projects",
    "all my projects",
    "every project",
    "across projects",
    "across all projects",
    "across all my projects",
    "everywhere",
    "all my repos",
    "all my repositories",
    "in every repo",
    "every repo",
    "every repository",
    "em todos os meus projetos",
    "em todos os projetos",
    "em qualquer projeto",
    "em todo projeto",
    "em todo lugar",
];

/// Single words that mark a standing preference.
pub(crate) const MARKER_WORDS: &[&str] = &[
    "always",
    "never",
    "prefer",
    "prefers",
    "preferred",
    "preferring",
    "sempre",
    "nunca",
    "prefiro",
    "preferimos",
    "prefira",
    "costumo",
];

/// Phrases that mark a standing preference (the general ones mark it too).
pub(crate) const MARKER_PHRASES: &[&str] = &[
    "instead of",
    "rather than",
    "from now on",
    "by default",
    "i usually",
    "i normally",
    "em vez de",
    "ao inves de",
    "a partir de agora",
    "por padrao",
    "eu costumo",
];

/// Comparison phrases: a sentence holding one says what to do even without a verb.
pub(crate) const COMPARISONS: &[&str] = &["instead of", "rather than", "em vez de", "ao inves de"];

/// Phrases that only frame a statement: dropped whole from a topic's terms.
pub(crate) const FRAME_PHRASES: &[&str] = &[
    "from now on",
    "going forward",
    "by default",
    "instead of",
    "rather than",
    "i usually",
    "i normally",
    "make sure",
    "be sure",
    "a partir de agora",
    "de agora em diante",
    "por padrao",
    "em vez de",
    "ao inves de",
    "por favor",
    "eu costumo",
];

/// Words that forbid (a ", not"/", não" comparison and a leading "no," are handled apart).
const NEGATIONS: &str = "\
    never nunca don't dont doesn't doesnt shouldn't shouldnt mustn't won't avoid avoids avoiding \
    avoided evite evitar evitem evitamos\
";

/// English, then Portuguese (folded).
const STOPWORDS: &str = "\
    a an the and or but to of in on at for with without by from into onto as is are be been being \
    was were it its it's this that these those i i'm i'd i've we we're you you're me us my our your \
    they them their he she please should must can could would will shall may might do does did have \
    has had just also only so then than there here when which who what how if else all any each \
    every some more most very too up about like want need let let's usually normally generally \
    typically ever really etc e.g i.e vs via per ok okay yes before after over instead rather \
    always everywhere one it'll we'll you'll sure sempre costumo o os as um uma uns umas de do da \
    dos das em na nas nos para pra por com sem e ou que se eu nos voce voces meu minha meus minhas \
    seu sua seus suas isso isto este esta esse essa aqui ao aos mais muito tambem so ja todo todos \
    toda todas quando antes depois sobre\
";

/// Whether `w` is one of the whitespace-separated words of `list`.
pub(crate) fn listed(list: &str, w: &str) -> bool {
    list.split_whitespace().any(|x| x == w)
}

/// Noise in a topic's terms: stopwords, markers and negation words.
pub(crate) fn is_noise(w: &str) -> bool {
    listed(STOPWORDS, w)
        || MARKER_WORDS.contains(&w)
        || listed(NEGATIONS, w)
        || matches!(w, "not" | "nao" | "no")
}

/// Whether the sentence forbids: a negation word, "not"/"não" outside a ", not Y" comparison,
/// or a leading "no" ("No semicolons", but not "No, use pnpm"). `framed`: tokens of a framing
/// phrase, skipped when looking for the leading word.
pub(crate) fn negated(toks: &[Token], framed: &[bool]) -> bool {
    let forbids = toks.iter().any(|t| {
        !t.code
            && (listed(NEGATIONS, &t.text)
                || (matches!(t.text.as_str(), "not" | "nao") && !t.after_comma && !t.comma))
    });
    let lead = toks.iter().enumerate().find(|(i, t)| {
        !framed.get(*i).copied().unwrap_or(false)
            && !matches!(t.text.as_str(), "please" | "and" | "also" | "so" | "then")
            && !GENERAL.iter().any(|g| g.split(' ').any(|w| w == t.text))
    });
    forbids || lead.is_some_and(|(_, t)| t.text == "no" && !t.comma && !t.code)
}

/// A plural `s` dropped from a plain word longer than 3 letters (not `ss`); possessive `'s`
/// dropped; paths, versions and tool names (`tests/suite`, `node.js`, `c++`) kept whole.
pub(crate) fn normalize_term(w: &str) -> String {
    let w = w.strip_suffix("'s").unwrap_or(w);
    let plain = w.chars().all(char::is_alphabetic);
    if plain && w.chars().count() > 3 && w.ends_with('s') && !w.ends_with("ss") {
        w[..w.len() - 1].to_owned()
    } else {
        w.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fold_lowercases_and_drops_accents() {
        assert_eq!(fold("Não Usar ESPAÇOS às vezes"), "nao usar espacos as vezes");
        assert_eq!(fold("don’t"), "don't");
    }

    #[test]
    fn tokens_keep_paths_and_tools_whole_and_see_commas_and_code() {
        let t = tokens("Use `cargo fmt` in tests/suite, not c++ or node.js.");
        let texts: Vec<_> = t.iter().map(|t| t.text.as_str()).collect();
        assert_eq!(
            texts,
            ["use", "cargo", "fmt", "in", "tests/suite", "not", "c++", "or", "node.js"]
        );
        assert!(t[1].code && t[2].code && !t[3].code);
        assert!(t[5].after_comma && t[4].comma);
        assert!(t[0].capital && !t[1].capital);
    }

    #[test]
    fn terms_lose_a_plural_s_but_paths_stay_whole() {
        assert_eq!(normalize_term("tabs"), "tab");
        assert_eq!(normalize_term("class"), "class");
        assert_eq!(normalize_term("css"), "css");
        assert_eq!(normalize_term("tests/suite"), "tests/suite");
        assert_eq!(normalize_term("node.js"), "node.js");
        assert_eq!(normalize_term("user's"), "user");
    }

    #[test]
    fn negation_ignores_comparisons_and_a_leading_no_comma() {
        let neg = |s: &str| {
            let t = tokens(s);
            negated(&t, &phrase_mask(&t, FRAME_PHRASES))
        };
        assert!(neg("Never use npm"));
        assert!(neg("do not use npm"));
        assert!(neg("No semicolons"));
        assert!(neg("From now on, no default exports"));
        assert!(neg("Não use npm"));
        assert!(!neg("Use pnpm, not npm."));
        assert!(!neg("No, use pnpm"));
        assert!(!neg("Use tabs, não espaços"));
        assert!(!neg("coloque os testes no diretório tests"));
    }
}
