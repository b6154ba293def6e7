//! Action verbs: their forms in English and Portuguese, and whether a word is used as a verb
//! where it stands ("use pnpm" against "the build"), which decides a sentence's action.

use super::words::{Token, is_noise, listed};

/// How a verb was written, which decides whether it can be a noun in context.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Form {
    /// `use`, `test`: a noun after a determiner.
    Base,
    /// `uses`, `tests`: a verb only after a subject or an adverb (else a plural noun).
    S,
    /// A Portuguese infinitive (`usar`): always a verb ("a usar" is not "a use").
    Infinitive,
    /// `-ing`, `-ed`, irregular or another Portuguese form.
    Other,
}

/// The action verbs, base forms.
const EN_VERBS: &str = "\
    use run write keep put place prefer add avoid commit push pin test format lint name create make \
    split structure document review squash rebase merge install deploy mock check follow start \
    store return handle type indent import export call ask open wrap log build update delete remove \
    default include rename move refactor explain answer reply respond fix edit change touch skip \
    set enable disable configure stick switch choose pick sort prefix validate bump tag release \
    ship print comment declare define reuse extract\
";

const EN_IRREGULAR: &[(&str, &str)] = &[
    ("ran", "run"),
    ("wrote", "write"),
    ("written", "write"),
    ("kept", "keep"),
    ("made", "make"),
    ("built", "build"),
    ("chose", "choose"),
    ("chosen", "choose"),
    ("stuck", "stick"),
];

const PT_VERBS: &str = "\
    usar:use usa:use usamos:use uso:use usem:use usando:use rodar:run rode:run roda:run rodem:run \
    rodando:run escrever:write escreva:write escrevendo:write manter:keep mantenha:keep colocar:put \
    coloque:put preferir:prefer prefiro:prefer preferimos:prefer prefira:prefer adicionar:add \
    adicione:add evitar:avoid evite:avoid evitem:avoid commitar:commit commite:commit testar:test \
    teste:test testando:test formatar:format formate:format criar:create crie:create fazer:make \
    faca:make separar:split separe:split nomear:name nomeie:name instalar:install instale:install \
    revisar:review revise:review documentar:document documente:document chamar:call chame:call \
    abrir:open abra:open tipar:type\
";

fn en(w: &str) -> Option<&'static str> {
    EN_VERBS.split_whitespace().find(|v| *v == w)
}

/// `pinn` -> `pin` (a doubled final consonant before -ing/-ed).
fn undouble(stem: &str) -> Option<&str> {
    let b = stem.as_bytes();
    let n = b.len();
    (n >= 2 && b[n - 1].is_ascii_alphabetic() && b[n - 1] == b[n - 2]).then(|| &stem[..n - 1])
}

fn regular(stem: &str) -> Option<&'static str> {
    en(stem).or_else(|| en(&format!("{stem}e"))).or_else(|| undouble(stem).and_then(en))
}

/// The base form of an action verb (`using`, `used`, `uses`, `usar` -> `use`), and its form.
pub(crate) fn verb_base(w: &str) -> Option<(&'static str, Form)> {
    if let Some(b) = en(w) {
        return Some((b, Form::Base));
    }
    if let Some((_, b)) =
        PT_VERBS.split_whitespace().filter_map(|p| p.split_once(':')).find(|(f, _)| *f == w)
    {
        return Some((b, if w.ends_with('r') { Form::Infinitive } else { Form::Other }));
    }
    if let Some(&(_, b)) = EN_IRREGULAR.iter().find(|(f, _)| *f == w) {
        return Some((b, Form::Other));
    }
    if let Some(stem) = w.strip_suffix("ing").or_else(|| w.strip_suffix("ed")) {
        return regular(stem).map(|b| (b, Form::Other));
    }
    let stem = w.strip_suffix('s')?;
    en(stem).or_else(|| stem.strip_suffix('e').and_then(en)).map(|b| (b, Form::S))
}

/// Words after which a verb-looking word is a noun ("the build", "o teste").
const DETERMINERS: &str = "\
    the a an my our your their his her its this that these those each every any some no o os um uma \
    uns umas meu minha meus minhas seu sua do da dos das no na nos nas este esta esse essa\
";

/// Words after which an `-s` form is a verb ("it uses", "always runs").
const S_SUBJECTS: &str = "\
    he she it this that who which everyone everybody nobody one always never usually normally also \
    only generally typically sempre nunca\
";

/// Adverbs that sit between a subject and its verb ("the tests never run").
const ADVERBS: &str = "always never usually normally also only generally typically sempre nunca";

/// Determiners that open a described subject ("the build", "these tests").
const SUBJECT_DETERMINERS: &str = "the this that these those its their";

/// Prepositions that make a determiner's phrase a place, not a subject ("in the tests, ...").
const PREPOSITIONS: &str = "in on at for with inside within during from into across under";

/// A verb whose subject is a described thing ("the tests never run on CI"): a report of what
/// happens, not a rule. Walks back over adverbs, then over up to three plain words to a
/// determiner that does not follow a preposition.
fn after_described_subject(toks: &[Token], i: usize) -> bool {
    let mut j = i;
    while j > 0 && listed(ADVERBS, &toks[j - 1].text) {
        j -= 1;
    }
    let mut words = 0;
    while j > 0 {
        let t = &toks[j - 1];
        if t.comma || t.code && words == 0 {
            return false;
        }
        if listed(SUBJECT_DETERMINERS, &t.text) {
            let place = j > 1 && listed(PREPOSITIONS, &toks[j - 2].text);
            return words > 0 && !place;
        }
        if is_noise(&t.text) || words == 3 {
            return false;
        }
        words += 1;
        j -= 1;
    }
    false
}

/// The base form of the action verb at token `i`, when the word is used as a verb there.
pub(crate) fn verb_at(toks: &[Token], i: usize) -> Option<&'static str> {
    let t = toks.get(i)?;
    if t.code {
        return None;
    }
    let (base, form) = verb_base(&t.text)?;
    let prev = i.checked_sub(1).and_then(|j| toks.get(j)).map(|p| p.text.as_str());
    if base == "default" && toks.get(i + 1).is_none_or(|n| n.text != "to") {
        return None;
    }
    if form != Form::Infinitive && prev.is_some_and(|p| listed(DETERMINERS, p)) {
        return None;
    }
    if form == Form::S && base != "prefer" && !prev.is_some_and(|p| listed(S_SUBJECTS, p)) {
        return None;
    }
    // "can you check", "you use npm": asking or describing the agent, not a rule.
    if prev.is_some_and(|p| p == "you" || p == "voce") {
        return None;
    }
    (!after_described_subject(toks, i)).then_some(base)
}

#[cfg(test)]
mod tests {
    use super::super::words::tokens;
    use super::*;

    #[test]
    fn verb_forms_normalize_to_their_base() {
        for (w, base) in [
            ("use", "use"),
            ("uses", "use"),
            ("using", "use"),
            ("used", "use"),
            ("committing", "commit"),
            ("pinned", "pin"),
            ("pushes", "push"),
            ("wrote", "write"),
            ("typing", "type"),
            ("usar", "use"),
            ("rode", "run"),
            ("faca", "make"),
        ] {
            assert_eq!(verb_base(w).map(|(b, _)| b), Some(base), "{w}");
        }
        for w in ["thing", "need", "fails", "string", "bus"] {
            assert_eq!(verb_base(w), None, "{w}");
        }
    }

    #[test]
    fn a_verb_after_a_determiner_or_a_bare_plural_is_a_noun() {
        let t = tokens("the build always fails");
        assert_eq!(verb_at(&t, 1), None);
        let t = tokens("Tests always pass");
        assert_eq!(verb_at(&t, 0), None);
        let t = tokens("it always uses pnpm");
        assert_eq!(verb_at(&t, 2), Some("use"));
        let t = tokens("começar a usar tabs");
        assert_eq!(verb_at(&t, 2), Some("use"));
        let t = tokens("by default use tabs");
        assert_eq!(verb_at(&t, 1), None);
        let t = tokens("default to pnpm");
        assert_eq!(verb_at(&t, 0), Some("default"));
    }

    #[test]
    fn a_verb_after_a_described_subject_is_a_report() {
        let t = tokens("okay so the tests never run on CI");
        assert_eq!(verb_at(&t, 5), None);
        let t = tokens("In the tests never use mocks");
        assert_eq!(verb_at(&t, 4), Some("use"));
        let t = tokens("Before the release, always bump the version");
        assert_eq!(verb_at(&t, 4), Some("bump"));
        let t = tokens("the tests never run on CI, can you check");
        assert_eq!(verb_at(&t, 8), None);
        let t = tokens("Run the tests and never skip them");
        assert_eq!(verb_at(&t, 5), Some("skip"));
    }
}
