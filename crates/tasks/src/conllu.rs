//! CoNLL-U, the format of Universal Dependencies treebanks
//! (<https://universaldependencies.org/format.html>): sentences of words with their dependency
//! heads and labels, to probe a model's heads against real parses ([`read`], [`parse`]), and
//! the `grammar` task's own sentences written in it ([`write_parsed`]), so any tool that reads
//! treebanks reads them too.
//!
//! Read: one word per line, ten tab-separated columns (ID, FORM, LEMMA, UPOS, XPOS, FEATS,
//! HEAD, DEPREL, DEPS, MISC), a blank line after each sentence, `#` comments (`# sent_id =`
//! and `# text =` are kept). Multiword tokens (`1-2`) and empty nodes (`1.1`) are not words
//! of the basic tree and are skipped, as Clark et al. scored words. Each sentence must be a
//! tree: IDs 1, 2, ... in order, every HEAD a word of the sentence or 0, exactly one root,
//! no cycle. An error names the file, the line and what is wrong.

use std::path::{Path, PathBuf};

use crate::dependency::ParsedSentence;

/// The largest CoNLL-U file read, checked before reading: 256 MiB (the largest UD treebank,
/// German HDT, is about 330 MB in its parts; each part is under it).
pub const MAX_CONLLU_BYTES: u64 = 256 << 20;

/// One sentence of a treebank: its words, each word's head and label.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreebankSentence {
    /// `# sent_id = ...`, when given.
    pub sent_id: Option<String>,
    /// `# text = ...`, when given.
    pub text: Option<String>,
    /// FORM of each word.
    pub words: Vec<String>,
    /// HEAD of each word: 0 for the root, else the head word's ID (1-based).
    pub heads: Vec<usize>,
    /// DEPREL of each word (`nsubj`, `obj`, `nmod:poss`, `root`, ...).
    pub relations: Vec<String>,
    /// Each word's line in its file (1-based), for messages; empty for a sentence that is not
    /// from a file (a task's, typed text).
    pub lines: Vec<usize>,
}

impl TreebankSentence {
    /// A `grammar` sentence (word ids named by `names`, [`crate::Task::token_names`]) as a
    /// treebank sentence: its words as text, HEAD 0 and DEPREL `root` for the main verb, the
    /// task's labels (`det`, `nsubj`, `dobj`, `prep`, `pobj`, ...) for the rest.
    pub fn of_parsed(sentence: &ParsedSentence, names: &[String]) -> TreebankSentence {
        let n = sentence.words.len();
        let mut heads = vec![0; n];
        let mut relations = vec!["root".to_string(); n];
        for arc in &sentence.arcs {
            heads[arc.dependent] = arc.head + 1;
            relations[arc.dependent] = arc.relation.name().to_string();
        }
        TreebankSentence {
            sent_id: None,
            text: None,
            words: sentence
                .words
                .iter()
                .map(|&id| names[id as usize].clone())
                .collect(),
            heads,
            relations,
            lines: vec![],
        }
    }
}

/// A CoNLL-U file that cannot be read, or a sentence that is not a tree.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}{}: {message}", .path.display(), line_suffix(*.line))]
pub struct ConlluError {
    /// The file.
    pub path: PathBuf,
    /// The line (1-based) at fault, or the sentence's first line; 0 for the whole file.
    pub line: usize,
    /// What is wrong, and what would be accepted.
    pub message: String,
}

fn line_suffix(line: usize) -> String {
    match line {
        0 => String::new(),
        line => format!(":{line}"),
    }
}

/// Reads the CoNLL-U file at `path`, refusing one over [`MAX_CONLLU_BYTES`] before reading.
pub fn read(path: &Path) -> Result<Vec<TreebankSentence>, ConlluError> {
    let fail = |message: String| ConlluError {
        path: path.to_path_buf(),
        line: 0,
        message,
    };
    // Bounded and regular files only: /dev/zero would fill the memory, a FIFO would block.
    let text = crate::small_file::read_to_string(path, MAX_CONLLU_BYTES).map_err(|e| {
        let split = if e.kind() == std::io::ErrorKind::FileTooLarge {
            "; split it"
        } else {
            ""
        };
        fail(format!("cannot read it: {e}{split}"))
    })?;
    let sentences = parse(&text, path)?;
    if sentences.is_empty() {
        return Err(fail(
            "holds no sentence (it is empty, or only comments); a CoNLL-U treebank needs at \
             least one"
                .to_string(),
        ));
    }
    Ok(sentences)
}

/// A sentence being read: its lines so far.
#[derive(Default)]
struct Partial {
    first_line: usize,
    sent_id: Option<String>,
    text: Option<String>,
    words: Vec<String>,
    heads: Vec<usize>,
    relations: Vec<String>,
    lines: Vec<usize>,
}

/// Parses CoNLL-U `text`; `path` names the file in errors.
pub fn parse(text: &str, path: &Path) -> Result<Vec<TreebankSentence>, ConlluError> {
    let error = |line: usize, message: String| ConlluError {
        path: path.to_path_buf(),
        line,
        message,
    };
    let mut sentences = vec![];
    let mut partial = Partial::default();
    for (index, raw) in text.lines().enumerate() {
        let line_number = index + 1;
        let line = raw.trim_end_matches('\r');
        if partial.first_line == 0 {
            partial.first_line = line_number;
        }
        if line.trim().is_empty() {
            if !partial.words.is_empty() {
                sentences.push(finish(std::mem::take(&mut partial), &error)?);
            } else {
                partial = Partial::default();
            }
            continue;
        }
        if let Some(comment) = line.strip_prefix('#') {
            let comment = comment.trim();
            if let Some(id) = comment.strip_prefix("sent_id =") {
                partial.sent_id = Some(id.trim().to_string());
            } else if let Some(text) = comment.strip_prefix("text =") {
                partial.text = Some(text.trim().to_string());
            }
            continue;
        }
        read_word(line, line_number, &mut partial).map_err(|m| error(line_number, m))?;
    }
    if !partial.words.is_empty() {
        sentences.push(finish(partial, &error)?);
    }
    Ok(sentences)
}

/// Adds the word on `line` to `partial`; multiword tokens and empty nodes are skipped.
fn read_word(line: &str, line_number: usize, partial: &mut Partial) -> Result<(), String> {
    let columns: Vec<&str> = line.split('\t').collect();
    if columns.len() != 10 {
        return Err(format!(
            "expected 10 tab-separated columns (ID FORM LEMMA UPOS XPOS FEATS HEAD DEPREL DEPS \
             MISC), found {}",
            columns.len()
        ));
    }
    let id = columns[0];
    if id.contains('-') || id.contains('.') {
        return Ok(()); // a multiword token or an empty node: not a word of the basic tree
    }
    let expected = partial.words.len() + 1;
    match id.parse::<usize>() {
        Ok(n) if n == expected => {}
        _ => {
            return Err(format!(
                "word ID {id:?} out of order: expected {expected} (IDs count 1, 2, ... in \
                 each sentence)"
            ));
        }
    }
    let head = columns[6].parse::<usize>().map_err(|_| {
        format!(
            "HEAD {:?} of word {id} is not a number: expected 0 (the root) or a word ID",
            columns[6]
        )
    })?;
    if columns[1].trim().is_empty() {
        return Err(format!(
            "FORM of word {id} is empty: every word has its text in FORM (the second column)"
        ));
    }
    partial.words.push(columns[1].to_string());
    partial.heads.push(head);
    partial.relations.push(columns[7].to_string());
    partial.lines.push(line_number);
    Ok(())
}

/// Checks that `partial` is a tree and returns it.
fn finish(
    partial: Partial,
    error: &impl Fn(usize, String) -> ConlluError,
) -> Result<TreebankSentence, ConlluError> {
    let n = partial.words.len();
    for (i, &head) in partial.heads.iter().enumerate() {
        if head > n {
            return Err(error(
                partial.lines[i],
                format!(
                    "HEAD {head} of word {} is out of range: the sentence has {n} words (HEAD \
                     is 0 for the root or a word ID)",
                    i + 1
                ),
            ));
        }
    }
    let roots: Vec<usize> = (0..n).filter(|&i| partial.heads[i] == 0).collect();
    if roots.len() != 1 {
        return Err(error(
            partial.first_line,
            format!(
                "the sentence has {} roots (words with HEAD 0); a tree has exactly one",
                roots.len()
            ),
        ));
    }
    if let Some(cycle) = find_cycle(&partial.heads) {
        let path: Vec<String> = cycle.iter().map(|w| w.to_string()).collect();
        return Err(error(
            partial.lines[cycle[0] - 1],
            format!(
                "words {} form a cycle (each the HEAD of the one before); a tree's heads lead \
                 to the root",
                path.join(" -> ")
            ),
        ));
    }
    Ok(TreebankSentence {
        sent_id: partial.sent_id,
        text: partial.text,
        words: partial.words,
        heads: partial.heads,
        relations: partial.relations,
        lines: partial.lines,
    })
}

/// A cycle among `heads` (1-based IDs, 0 the root), as the IDs around it starting and
/// ending at its smallest; `None` when every word's heads lead to the root.
fn find_cycle(heads: &[usize]) -> Option<Vec<usize>> {
    let n = heads.len();
    for start in 1..=n {
        let mut path = vec![start];
        let mut word = heads[start - 1];
        // n steps reach the root from any word of a tree.
        for _ in 0..n {
            if word == 0 {
                break;
            }
            if let Some(at) = path.iter().position(|&w| w == word) {
                let mut cycle = path[at..].to_vec();
                let smallest = (0..cycle.len()).min_by_key(|&i| cycle[i]).unwrap_or(0);
                cycle.rotate_left(smallest);
                cycle.push(cycle[0]);
                return Some(cycle);
            }
            path.push(word);
            word = heads[word - 1];
        }
    }
    None
}

/// `sentences` (the `grammar` task's, word ids named by `names`, [`crate::Task::token_names`])
/// as CoNLL-U: `# sent_id` (1, 2, ...) and `# text`, then one line per word with its FORM,
/// HEAD and DEPREL (the task's labels: `det`, `nsubj`, `dobj`, `prep`, `pobj`, ...; `root`
/// for the main verb); the other columns `_`.
pub fn write_parsed(sentences: &[ParsedSentence], names: &[String]) -> String {
    let trees: Vec<TreebankSentence> = sentences
        .iter()
        .map(|sentence| TreebankSentence::of_parsed(sentence, names))
        .collect();
    write_trees(&trees)
}

/// `trees` as CoNLL-U: `# sent_id` (1, 2, ... in order, whatever ids they were read with)
/// and `# text` (the words joined by spaces), then one line per word with its FORM, HEAD and
/// DEPREL; the other columns `_`. What [`read`] reads back as the same trees.
pub fn write_trees(trees: &[TreebankSentence]) -> String {
    let mut out = String::new();
    for (index, tree) in trees.iter().enumerate() {
        out.push_str(&format!(
            "# sent_id = {}\n# text = {}\n",
            index + 1,
            tree.words.join(" ")
        ));
        for (position, word) in tree.words.iter().enumerate() {
            out.push_str(&format!(
                "{}\t{word}\t_\t_\t_\t_\t{}\t{}\t_\t_\n",
                position + 1,
                tree.heads[position],
                tree.relations[position]
            ));
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{GrammarSpec, TaskConfig};

    fn parse_text(text: &str) -> Result<Vec<TreebankSentence>, ConlluError> {
        parse(text, Path::new("t.conllu"))
    }

    fn line(id: &str, form: &str, head: &str, relation: &str) -> String {
        format!("{id}\t{form}\t_\t_\t_\t_\t{head}\t{relation}\t_\t_\n")
    }

    #[test]
    fn the_grammar_task_writes_its_sentences_and_reads_them_back() {
        let task = TaskConfig::Grammar(GrammarSpec::default())
            .build(Path::new("."))
            .unwrap();
        let names = task.token_names().unwrap();
        let sentences = task.parsed_sentences(50, 7);
        let text = write_parsed(&sentences, &names);
        let read = parse_text(&text).unwrap();
        assert_eq!(read.len(), 50);
        for (sentence, back) in sentences.iter().zip(&read) {
            let words: Vec<&str> = sentence
                .words
                .iter()
                .map(|&id| names[id as usize].as_str())
                .collect();
            assert_eq!(back.words, words);
            assert_eq!(back.text.as_deref(), Some(words.join(" ").as_str()));
            assert_eq!(back.heads[sentence.root], 0);
            assert_eq!(back.relations[sentence.root], "root");
            for arc in &sentence.arcs {
                assert_eq!(back.heads[arc.dependent], arc.head + 1);
                assert_eq!(back.relations[arc.dependent], arc.relation.name());
            }
        }
    }

    #[test]
    fn multiword_tokens_empty_nodes_and_comments_are_not_words() {
        let text = [
            "# newdoc id = x\n".to_string(),
            "# sent_id = s1\n".to_string(),
            "# text = I don't.\n".to_string(),
            line("1", "I", "3", "nsubj"),
            "2-3\tdon't\t_\t_\t_\t_\t_\t_\t_\t_\n".to_string(),
            line("2", "do", "3", "aux"),
            line("3", "n't", "0", "root"),
            "3.1\tgo\t_\t_\t_\t_\t_\t_\t3:conj\t_\n".to_string(),
            line("4", ".", "3", "punct"),
            "\n".to_string(),
            line("1", "Yes", "0", "root"),
        ]
        .concat();
        let read = parse_text(&text).unwrap();
        assert_eq!(
            read.len(),
            2,
            "the last sentence needs no blank line after it"
        );
        assert_eq!(read[0].words, ["I", "do", "n't", "."]);
        assert_eq!(read[0].heads, [3, 3, 0, 3]);
        assert_eq!(read[0].sent_id.as_deref(), Some("s1"));
        assert_eq!(read[0].text.as_deref(), Some("I don't."));
        assert_eq!(read[1].words, ["Yes"]);
    }

    #[test]
    fn a_sentence_that_is_not_a_tree_is_refused_at_its_line() {
        let sentence = |lines: &[String]| parse_text(&lines.concat()).unwrap_err().to_string();
        let error = sentence(&[line("1", "a", "0", "root"), line("2", "b", "5", "dep")]);
        assert_eq!(
            error,
            "t.conllu:2: HEAD 5 of word 2 is out of range: the sentence has 2 words (HEAD is 0 \
             for the root or a word ID)"
        );
        let error = sentence(&[
            line("1", "a", "0", "root"),
            line("2", "b", "3", "dep"),
            line("3", "c", "4", "dep"),
            line("4", "d", "2", "dep"),
        ]);
        assert_eq!(
            error,
            "t.conllu:2: words 2 -> 3 -> 4 -> 2 form a cycle (each the HEAD of the one before); \
             a tree's heads lead to the root"
        );
        let error = sentence(&[line("1", "a", "2", "dep"), line("2", "b", "1", "dep")]);
        assert!(
            error.contains("t.conllu:1: the sentence has 0 roots"),
            "{error}"
        );
        let error = sentence(&[line("1", "a", "0", "root"), line("2", "b", "0", "root")]);
        assert!(error.contains("has 2 roots"), "{error}");
        let error = sentence(&[line("1", "a", "0", "root"), line("3", "b", "1", "dep")]);
        assert!(
            error.starts_with("t.conllu:2: word ID \"3\" out of order: expected 2"),
            "{error}"
        );
        let error = sentence(&[line("1", "a", "x", "root")]);
        assert!(
            error.contains("HEAD \"x\" of word 1 is not a number"),
            "{error}"
        );
        let error = sentence(&["1\ta\t_\t0\troot\n".to_string()]);
        assert!(
            error.contains("t.conllu:1: expected 10 tab-separated columns")
                && error.contains("found 5"),
            "{error}"
        );
    }

    #[test]
    fn a_missing_file_is_refused_by_name() {
        let error = read(Path::new("/nonexistent/t.conllu"))
            .unwrap_err()
            .to_string();
        assert!(
            error.starts_with("/nonexistent/t.conllu: cannot read it"),
            "{error}"
        );
    }

    /// `--probe-conllu /dev/zero` grew to 23.8 GB before the OOM killer came, and a FIFO hung
    /// with no message (issue 67): both are refused by what they are, before a byte is read.
    #[test]
    fn a_device_or_a_fifo_is_refused_without_reading_it() {
        let error = read(Path::new("/dev/zero")).unwrap_err().to_string();
        assert!(
            error.contains("/dev/zero: cannot read it: it is a device, not a regular file"),
            "{error}"
        );
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("pipe.conllu");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        if !made.is_ok_and(|status| status.success()) {
            eprintln!("skipped the FIFO: mkfifo is not here");
            return;
        }
        let error = read(&fifo).unwrap_err().to_string();
        assert!(
            error.contains("it is a FIFO (named pipe), not a regular file"),
            "{error}"
        );
    }
}
