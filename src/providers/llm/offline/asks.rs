//! What a visitor's question asks for (who, when, what material, where shown, what it shows),
//! which decides the record field an offline answer comes from, and the description sentence
//! that answers it when the field is empty. Pure.

use crate::retrieval::Exhibit;
use crate::retrieval::text::normalize;

/// What a question asks for, which decides the record field the answer comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Asks {
    /// Who made it (maker), or who someone is (a biography passage).
    Who,
    /// When it was made (date, period).
    When,
    /// What it is made of (medium).
    Material,
    /// Where it is shown (gallery).
    Where,
    /// What it shows or tells (the description).
    Depicts,
    /// Anything else: the record's main facts and its best passage.
    General,
}

/// Cues of each kind of question, on normalised text (lower case, Simplified). Checked in
/// this order: the first kind with a cue wins.
const ASKS: &[(Asks, &[&str])] = &[
    (
        Asks::Material,
        &[
            "made of",
            "made from",
            "what material",
            "which material",
            "what medium",
            "material",
            "what is it made",
            "what are they made",
            "材质",
            "材料",
            "质地",
            "什么做的",
            "什么材",
            "什么制成",
            "用什么做",
            "什么质",
        ],
    ),
    (
        Asks::When,
        &[
            "when ",
            "what year",
            "which year",
            "what century",
            "which century",
            "how old",
            "what date",
            "what period",
            "which period",
            "which dynasty",
            "what dynasty",
            "什么时候",
            "哪一年",
            "哪年",
            "几几年",
            "年代",
            "朝代",
            "何时",
            "哪个时期",
            "什么时期",
            "哪个朝",
            "多少年",
            "哪个世纪",
            "几世纪",
            "多久",
        ],
    ),
    (
        Asks::Who,
        &[
            "who ",
            "whose ",
            "by whom",
            "which artist",
            "what artist",
            "which painter",
            "maker",
            "谁",
            "何人",
            "作者",
            "哪位",
            "出自",
            "什么人",
        ],
    ),
    (
        Asks::Where,
        &[
            "where ",
            "which gallery",
            "what gallery",
            "which room",
            "which floor",
            "on display",
            "on view",
            "在哪",
            "哪里",
            "哪儿",
            "哪个展",
            "展厅",
            "展区",
            "展出",
            "什么地方",
            "几楼",
        ],
    ),
    (
        Asks::Depicts,
        &[
            "depict",
            "what does it show",
            "what does the",
            "what is shown",
            "what's shown",
            "what is in the",
            "what scene",
            "what story",
            "what is it about",
            "about what",
            "meaning",
            "what does it mean",
            "describe",
            "画的是",
            "画了什么",
            "画的什么",
            "描绘",
            "讲的是",
            "讲什么",
            "讲了什么",
            "内容",
            "写的是",
            "写了什么",
            "写的什么",
            "表现",
            "意思",
            "寓意",
            "含义",
            "故事",
        ],
    ),
];

/// English question words that also open relative clauses ("a princess who faints", "the
/// year when", "somewhere"): they ask only where they open the question or a clause, or follow
/// one of [`WH_LEADS`] ("do you know who", "tell me when").
const WH_WORDS: [&str; 4] = ["who ", "whose ", "when ", "where "];
/// Words after which a question word still asks (see [`WH_WORDS`]).
const WH_LEADS: [&str; 11] = [
    "and ", "but ", "so ", "know ", "me ", "us ", "tell ", "wonder ", "ask ", "say ", "then ",
];

/// Whether the normalised question `q` holds the cue `c` (see [`WH_WORDS`]).
fn has_cue(q: &str, c: &str) -> bool {
    if !WH_WORDS.contains(&c) {
        return q.contains(c);
    }
    q.match_indices(c).any(|(i, _)| {
        let before = q[..i].trim_end();
        before.is_empty()
            || before.ends_with([
                '.', '?', '!', ',', ';', ':', '"', '“', '(', '？', '，', '。',
            ])
            || WH_LEADS.iter().any(|l| q[..i].ends_with(l))
    })
}

/// The kind of a visitor's question (English or Chinese, either script).
pub fn asks(question: &str) -> Asks {
    let q = format!("{} ", normalize(question));
    ASKS.iter()
        .find(|(_, cues)| cues.iter().any(|c| has_cue(&q, c)))
        .map_or(Asks::General, |(a, _)| *a)
}

/// Words in a description sentence that carry the answer to a kind of question, for records
/// whose field is empty (normalised: lower case, Simplified).
fn sentence_cues(a: Asks) -> &'static [&'static str] {
    match a {
        Asks::Who => &[
            "made by",
            "painted by",
            "carved by",
            "written by",
            "designed by",
            "artist",
            "attributed",
            "signed by",
            "所书",
            "书写",
            "所作",
            "所绘",
            "所撰",
            "撰写",
            "作者",
            "出自",
            "手笔",
            "所刻",
            "所题",
            "亲笔",
            "书法家",
            "画家",
        ],
        Asks::When => &[
            "century", "dynasty", "period", "dated", "年", "朝", "代", "世纪", "时期",
        ],
        Asks::Material => &[
            "made of",
            "silver",
            "gold",
            "bronze",
            "ivory",
            "wood",
            "lacquer",
            "porcelain",
            "stone",
            "marble",
            "silk",
            "paper",
            "oil on",
            "质",
            "瓷",
            "铜",
            "玉",
            "木",
            "纸",
            "绢",
            "石",
            "釉",
            "漆",
        ],
        Asks::Where | Asks::Depicts | Asks::General => &[],
    }
}

/// The sentence of `e`'s description that best answers a question of kind `a`: the most of the
/// question's terms, then a sentence with the kind's cue words; the retrieved passage when no
/// sentence has a cue.
pub(super) fn answer_sentence(e: &Exhibit, question: &str, a: Asks, passage: &str) -> String {
    let cues = sentence_cues(a);
    if cues.is_empty() {
        return passage.to_string();
    }
    let terms = crate::retrieval::text::query_terms(question);
    let best = crate::retrieval::text::sentences(&e.description)
        .into_iter()
        .enumerate()
        .filter_map(|(i, s)| {
            let n = normalize(&s);
            let cue = cues.iter().any(|c| n.contains(c)) || (a == Asks::When && has_year(&n));
            if !cue {
                return None;
            }
            let hits = terms.iter().filter(|t| n.contains(t.text.as_str())).count();
            Some((hits, std::cmp::Reverse(i), s))
        })
        .max_by(|x, y| (x.0, x.1).cmp(&(y.0, y.1)));
    best.map_or_else(|| passage.to_string(), |(_, _, s)| s)
}

/// A run of three or four digits (a year).
fn has_year(s: &str) -> bool {
    let mut run = 0;
    for c in s.chars().chain(std::iter::once(' ')) {
        if c.is_ascii_digit() {
            run += 1;
        } else {
            if (3..=4).contains(&run) {
                return true;
            }
            run = 0;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn question_kinds() {
        for (q, want) in [
            ("Who made the lacquer box?", Asks::Who),
            ("峄山刻石相传是谁写的？", Asks::Who),
            ("這幅畫的作者是誰？", Asks::Who),
            ("When was the vase made?", Asks::When),
            ("这件青铜鼎是什么年代的", Asks::When),
            ("What is the inro made of?", Asks::Material),
            ("这件瓷器是什么材质？", Asks::Material),
            ("Where can I see the badger box?", Asks::Where),
            ("三希堂法帖在哪个展厅？", Asks::Where),
            ("What does the scroll depict?", Asks::Depicts),
            ("这幅画画的是什么？", Asks::Depicts),
            ("Tell me about the badger box", Asks::General),
            // Relative clauses do not ask: the question is whether the work is here.
            (
                "Is there a painting of a princess who faints when she hears the news?",
                Asks::General,
            ),
            ("Is there a vase from somewhere in Persia?", Asks::General),
            ("Do you know who made the lacquer box?", Asks::Who),
            ("The badger box, when was it made?", Asks::When),
            ("And where is the scroll shown?", Asks::Where),
            ("请介绍一下《三希堂法帖》", Asks::General),
        ] {
            assert_eq!(asks(q), want, "{q}");
        }
    }
}
