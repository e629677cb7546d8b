//! A reader of WordNet's database files (the `index.*`, `data.*` and `*.exc` files of the
//! `dict` folder, as Debian's `wordnet-base` installs them under `/usr/share/wordnet`), into the
//! compact [`Lexicon`] the negotiator reads.
//!
//! The format is WordNet's own (`wndb(5)`): one synset a line in `data.noun` and `data.verb`,
//! found by its byte offset; `lemma pos ... offsets` lines in `index.noun` and `index.verb`, the
//! senses in order of frequency; and the irregular forms (`mice mouse`) in `noun.exc` and
//! `verb.exc`. Only nouns and verbs are read: the negotiator compares what people are and do, and
//! seeks and offers. A line it cannot read is skipped (the files are the distribution's), and a
//! folder without the files is [`LoadError::Missing`].

use super::{Lexicon, Synset};
use std::path::Path;

// The loader's maps see every word of the database once or more: aHash rather than SipHash
// (the input is the installed database, not anyone's request).
type HashMap<K, V> = std::collections::HashMap<K, V, ahash::RandomState>;

/// Words of the database already stemmed, with their stems' ids.
pub(super) type StemCache = HashMap<String, u32>;

/// Why a lexicon could not be loaded.
#[derive(Debug)]
pub enum LoadError {
    /// The folder has no WordNet files.
    Missing(String),
    /// A file could not be read.
    Io(String, std::io::Error),
}

impl std::fmt::Display for LoadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LoadError::Missing(dir) => write!(f, "no WordNet database in {dir} (index.noun and data.noun not found)"),
            LoadError::Io(path, e) => write!(f, "reading {path}: {e}"),
        }
    }
}

/// The parts of speech read, with their file suffixes.
const PARTS: [(&str, bool); 2] = [("noun", false), ("verb", true)];

/// Words of a gloss that say nothing about its sense.
const GLOSS_STOP: &[&str] = &[
    "a",
    "about",
    "an",
    "and",
    "any",
    "are",
    "as",
    "at",
    "be",
    "been",
    "being",
    "by",
    "can",
    "especially",
    "for",
    "from",
    "has",
    "have",
    "in",
    "into",
    "is",
    "it",
    "its",
    "kind",
    "made",
    "make",
    "many",
    "more",
    "most",
    "of",
    "on",
    "one",
    "or",
    "other",
    "out",
    "part",
    "person",
    "some",
    "someone",
    "something",
    "such",
    "than",
    "that",
    "the",
    "their",
    "them",
    "this",
    "those",
    "to",
    "up",
    "used",
    "usually",
    "very",
    "was",
    "which",
    "who",
    "whom",
    "with",
    "without",
];

/// Whether a definition's word says nothing of its sense (a binary search: every word of
/// WordNet's definitions passes here at load).
fn stop(word: &str) -> bool {
    GLOSS_STOP.binary_search(&word).is_ok()
}

/// Loads the lexicon from `dir`.
pub fn load(dir: &Path) -> Result<Lexicon, LoadError> {
    if !dir.join("index.noun").is_file() || !dir.join("data.noun").is_file() {
        return Err(LoadError::Missing(dir.display().to_string()));
    }
    let read = |name: &str| -> Result<String, LoadError> {
        let path = dir.join(name);
        std::fs::read_to_string(&path).map_err(|e| LoadError::Io(path.display().to_string(), e))
    };
    let mut lex = Lexicon::default();
    let mut stem_cache = StemCache::default();
    // Pass 1: every synset, by (part of speech, offset).
    let mut at: HashMap<(bool, u32), u32> = HashMap::default();
    let mut pending: Vec<(Vec<Pointer>, Vec<Pointer>)> = Vec::new();
    for (suffix, verb) in PARTS {
        let data = read(&format!("data.{suffix}"))?;
        for line in data.lines().filter(|l| !l.starts_with(' ')) {
            let Some((synset, hypernyms, topics)) = parse_data_line(line, verb, &mut lex, &mut stem_cache) else {
                continue;
            };
            at.insert((verb, synset.0), lex.synsets.len() as u32);
            lex.synsets.push(synset.1);
            pending.push((hypernyms, topics));
        }
    }
    // Pass 2: pointers, now that every synset has its index.
    for (i, (hypernyms, topics)) in pending.into_iter().enumerate() {
        let start = lex.pool.len() as u32;
        lex.pool.extend(hypernyms.iter().filter_map(|k| at.get(k)));
        let hyper_len = lex.pool.len() as u32 - start;
        lex.pool.extend(topics.iter().filter_map(|k| at.get(k)));
        let topic_len = lex.pool.len() as u32 - start - hyper_len;
        let s = &mut lex.synsets[i];
        s.hyper = (start, hyper_len.min(255) as u8);
        s.topic = (start + hyper_len, topic_len.min(255) as u8);
    }
    lex.compute_depths();
    // The index: lemma -> senses, most frequent first.
    for (suffix, verb) in PARTS {
        let index = read(&format!("index.{suffix}"))?;
        for line in index.lines().filter(|l| !l.starts_with(' ')) {
            let fields: Vec<&str> = line.split(' ').filter(|f| !f.is_empty()).collect();
            if fields.len() < 6 {
                continue;
            }
            let Ok(synset_cnt) = fields[2].parse::<usize>() else { continue };
            let Ok(p_cnt) = fields[3].parse::<usize>() else { continue };
            let first = 4 + p_cnt + 2;
            let senses: Vec<u32> = fields
                .get(first..first + synset_cnt)
                .unwrap_or_default()
                .iter()
                .filter_map(|o| o.parse::<u32>().ok())
                .filter_map(|o| at.get(&(verb, o)).copied())
                .collect();
            if !senses.is_empty() {
                lex.add_senses(fields[0], verb, &senses);
            }
        }
        if let Ok(exc) = read(&format!("{suffix}.exc")) {
            for line in exc.lines() {
                let mut f = line.split(' ');
                if let (Some(form), Some(base)) = (f.next(), f.next()) {
                    lex.exceptions.entry(form.into()).or_insert_with(|| base.into());
                }
            }
        }
    }
    lex.finish();
    Ok(lex)
}

/// Where a pointer leads: (a verb's synset, its byte offset).
type Pointer = (bool, u32);

/// One line of a data file: the synset (with its offset), and its hypernyms' and topics' keys.
type DataLine = ((u32, Synset), Vec<Pointer>, Vec<Pointer>);

fn parse_data_line(line: &str, verb: bool, lex: &mut Lexicon, stems: &mut StemCache) -> Option<DataLine> {
    let (head, gloss) = line.split_once(" | ").unwrap_or((line, ""));
    let f: Vec<&str> = head.split(' ').filter(|x| !x.is_empty()).collect();
    let offset: u32 = f.first()?.parse().ok()?;
    let lexfile: u8 = f.get(1)?.parse().ok()?;
    let w_cnt = usize::from_str_radix(f.get(3)?, 16).ok()?;
    let words: Vec<&str> = (0..w_cnt).filter_map(|k| f.get(4 + 2 * k).copied()).collect();
    let mut p = 4 + 2 * w_cnt;
    let p_cnt: usize = f.get(p)?.parse().ok()?;
    p += 1;
    let (mut hypernyms, mut topics) = (Vec::new(), Vec::new());
    let mut instance = false;
    for _ in 0..p_cnt {
        let (symbol, target, pos) = (f.get(p)?, f.get(p + 1)?, f.get(p + 2)?);
        p += 4;
        let Ok(target) = target.parse::<u32>() else { continue };
        let target_verb = match *pos {
            "n" => false,
            "v" => true,
            _ => continue,
        };
        match *symbol {
            "@" => hypernyms.push((target_verb, target)),
            "@i" => {
                instance = true;
                hypernyms.push((target_verb, target));
            }
            ";c" => topics.push((target_verb, target)),
            _ => {}
        }
    }
    // The signature: the synset's own words, then its gloss's content words (examples left out).
    let start = lex.pool.len() as u32;
    let mut push = |lex: &mut Lexicon, word: &str| {
        let id = lex.intern_stem(stems, word);
        if !lex.pool[start as usize..].contains(&id) {
            lex.pool.push(id);
        }
    };
    for w in &words {
        for part in w.split(['_', '-']).filter(|x| x.len() > 1 && !stop(&x.to_ascii_lowercase())) {
            push(lex, &part.to_ascii_lowercase());
        }
    }
    let own = lex.pool.len() as u32 - start;
    let definition = gloss.split("; \"").next().unwrap_or_default();
    for word in definition
        .split(|c: char| !c.is_ascii_alphabetic())
        .filter(|w| w.len() > 2)
        .map(str::to_ascii_lowercase)
        .filter(|w| !stop(w))
    {
        push(lex, &word);
    }
    let len = (lex.pool.len() as u32 - start).min(u16::MAX as u32) as u16;
    let synset = Synset {
        lexfile,
        verb,
        instance,
        depth: 0,
        hyper: (0, 0),
        topic: (0, 0),
        sig: (start, len),
        own: own.min(255) as u8,
    };
    Some(((offset, synset), hypernyms, topics))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stop_words_are_sorted_for_their_binary_search() {
        assert!(GLOSS_STOP.windows(2).all(|w| w[0] < w[1]));
        assert!(stop("the") && stop("which") && !stop("violin"));
    }

    #[test]
    fn a_missing_folder_is_missing() {
        let err = load(Path::new("/nonexistent/wordnet")).unwrap_err();
        assert!(matches!(err, LoadError::Missing(_)), "{err}");
        assert!(err.to_string().contains("/nonexistent/wordnet"));
    }

    #[test]
    fn a_small_database_reads_its_senses_hypernyms_and_irregular_forms() {
        let dir = std::env::temp_dir().join(format!("parley-wordnet-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // Offsets are the byte positions WordNet uses; the reader only needs them to be unique.
        let noun = "\
00000001 03 n 01 entity 0 000 | that which is perceived
00000002 18 n 02 person 0 individual 0 001 @ 00000001 n 0000 | a human being
00000003 18 n 01 musician 0 001 @ 00000002 n 0000 | artist who plays a musical instrument
00000004 18 n 01 conductor 0 001 @ 00000003 n 0000 | the person who leads a musical group
00000005 18 n 01 conductor 0 001 @ 00000002 n 0000 | the person who collects fares on a public conveyance
00000006 18 n 01 mouse 0 001 @ 00000001 n 0000 | a small rodent
";
        let index = "\
conductor n 2 1 @ 2 0 00000004 00000005
entity n 1 0 1 0 00000001
mouse n 1 1 @ 1 0 00000006
musician n 1 1 @ 1 0 00000003
person n 1 1 @ 1 0 00000002
";
        std::fs::write(dir.join("data.noun"), noun).unwrap();
        std::fs::write(dir.join("index.noun"), index).unwrap();
        std::fs::write(dir.join("data.verb"), "").unwrap();
        std::fs::write(dir.join("index.verb"), "").unwrap();
        std::fs::write(dir.join("noun.exc"), "mice mouse\n").unwrap();
        let lex = load(&dir).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        let senses = lex.senses("conductors");
        assert_eq!(senses.len(), 2);
        assert_eq!(lex.senses("mice").len(), 1);
        let musician = lex.senses("musician")[0];
        assert!(lex.ancestors(senses[0], 3).any(|a| a == musician));
        assert!(!lex.ancestors(senses[1], 3).any(|a| a == musician));
        assert_eq!(lex.lexfile(senses[0]), 18);
    }
}
