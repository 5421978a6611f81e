//! Browse questions: a visitor asks what the collection holds rather than about one exhibit.
//! A kind the museum's records name (a department, the head of a medium: "Do you have any
//! ceramics?", 有没有瓷器？) is answered with its total and a few of its exhibits; other browse
//! questions with the best matches; "the second one" picks from either list.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use museum_agent::config::LlmProviderKind;
use museum_agent::retrieval::kinds;
use museum_agent::retrieval::text::normalize;

use crate::support::fake_llm::{system_prompt, text_reply};
use crate::support::*;

fn demo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/collection/exhibits.jsonl")
}

/// The demo's records by id: (title, department, medium head token).
fn records() -> HashMap<String, (String, String, Option<String>)> {
    std::fs::read_to_string(demo())
        .unwrap()
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            let s = |k: &str| v[k].as_str().unwrap_or("").to_string();
            (
                s("id"),
                (
                    s("title"),
                    kinds::department(&s("gallery_or_department"))
                        .unwrap_or("")
                        .to_string(),
                    kinds::medium_head(&s("medium")),
                ),
            )
        })
        .collect()
}

/// The whole demo collection (lists need several exhibits of a kind, and the no-answer fit is
/// for a collection of a museum's size), answered offline or by the fake model.
async fn demo_app(provider: LlmProviderKind) -> TestApp {
    spawn_app_with(move |c| {
        c.srs.load_demo = true;
        c.srs.demo_path = demo();
        if provider != LlmProviderKind::Openai {
            c.llm.provider = provider;
        }
    })
    .await
}

/// "Do you have any ceramics?" is answered with the Ceramics department's total and a few of
/// its exhibits, the first one's card shown, and a pick from the list works; 有没有瓷器？ reaches
/// the porcelains through the dictionary; a browse question with a word that names no kind
/// ("Japanese ceramics") is searched as before; a model gets the total in its prompt.
#[tokio::test]
async fn a_question_about_a_kind_gets_its_total_and_a_few_of_its_exhibits() {
    let records = records();
    let ceramics = records
        .values()
        .filter(|(_, d, m)| d == "Ceramics" || m.as_deref() == Some("ceram"))
        .count();
    assert!(ceramics >= 200, "{ceramics}");
    let app = demo_app(LlmProviderKind::Offline).await;
    let mut c = app.client().await;
    c.text_request("list", "Do you have any ceramics?").await;
    let list = c.reply("list").await;
    let head = format!("Our collection has {ceramics} exhibits in Ceramics, for example: ");
    assert!(list.text.starts_with(&head), "{}", list.text);
    let titles = museum_agent::pipeline::follow_up::quoted_titles(&list.text);
    assert_eq!(titles.len(), 4, "{titles:?}");
    for t in &titles {
        assert!(
            records
                .values()
                .any(|(title, d, _)| title == t && d == "Ceramics"),
            "{t} is not a ceramic"
        );
    }
    let shown = list.calls[0]["parameters"]["exhibit_id"].as_str().unwrap();
    assert_eq!(records[shown].0, titles[0]);
    c.text_request("second", "Tell me about the second one")
        .await;
    let r = c.reply("second").await;
    assert!(r.text.contains(&titles[1]), "{} → {}", titles[1], r.text);
    let shown = r.calls[0]["parameters"]["exhibit_id"].as_str().unwrap();
    assert_eq!(records[shown].0, titles[1]);

    // In Chinese: 瓷器 is "chinaware; porcelain" in the dictionary, porcelain a medium head.
    let porcelain = records
        .values()
        .filter(|(_, _, m)| m.as_deref() == Some("porcelain"))
        .count();
    let mut zh = app.client().await;
    zh.text_request("list", "有没有瓷器？").await;
    let list = zh.reply("list").await;
    assert!(
        list.text
            .starts_with(&format!("馆藏中有{porcelain}件瓷器（porcelain），例如：")),
        "{}",
        list.text
    );
    let titles = museum_agent::pipeline::follow_up::quoted_titles(&list.text);
    assert!(titles.len() >= 2, "{titles:?}");
    for t in &titles {
        assert!(
            records
                .values()
                .any(|(title, _, m)| title == t && m.as_deref() == Some("porcelain")),
            "{t} is not porcelain"
        );
    }

    // The examples of a department are the records named for the visitor's word when the
    // department has them: "armor" and 盔甲 (armor in the dictionary) list the suits of armor
    // of Arms & Armor before its many sword guards, whatever their records' lengths.
    let named_armor = records
        .values()
        .filter(|(title, d, _)| d == "Arms & Armor" && title.contains("Armor"))
        .count();
    assert!(named_armor >= 2, "{named_armor}");
    for (id, q) in [("en", "Do you have any armor?"), ("zh", "有沒有盔甲？")] {
        zh.text_request(id, q).await;
        let list = zh.reply(id).await;
        let titles = museum_agent::pipeline::follow_up::quoted_titles(&list.text);
        assert!(titles.len() >= 2, "{q}: {titles:?}");
        for t in &titles[..2] {
            assert!(t.contains("Armor"), "{q}: {titles:?}");
        }
    }

    // A Chinese catalogue names the kind at the end of its titles (…墓誌銘).
    let epitaphs = records
        .values()
        .filter(|(title, _, _)| {
            kinds::markers("", "", title)
                .split(' ')
                .any(|m| m == "#t:墓志铭")
        })
        .count();
    assert!(epitaphs >= 100, "{epitaphs}");
    zh.text_request("epitaphs", "有没有墓志铭？").await;
    let list = zh.reply("epitaphs").await;
    assert!(
        list.text
            .starts_with(&format!("馆藏中「墓志铭」类的展品有{epitaphs}件，例如：")),
        "{}",
        list.text
    );
    for t in museum_agent::pipeline::follow_up::quoted_titles(&list.text) {
        assert!(t.ends_with("墓志铭"), "{t}");
    }

    // A word that names no kind narrows one that does: the ceramics whose records say
    // Japanese, those that weigh it most (a culture field) listed first.
    c.text_request("japanese", "Do you have any Japanese ceramics?")
        .await;
    let r = c.reply("japanese").await;
    let raw: HashMap<String, String> = std::fs::read_to_string(demo())
        .unwrap()
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            (v["id"].as_str().unwrap().to_string(), l.to_lowercase())
        })
        .collect();
    let says_japanese: Vec<&String> = records
        .iter()
        .filter(|(id, (_, d, m))| {
            (d == "Ceramics" || m.as_deref() == Some("ceram")) && raw[*id].contains("japanese")
        })
        .map(|(_, (t, _, _))| t)
        .collect();
    let japanese = says_japanese.len();
    assert!(japanese >= 2, "{japanese}");
    assert!(
        r.text.starts_with(&format!(
            "Our collection has {japanese} exhibits in Ceramics that mention Japanese, for example: "
        )),
        "{}",
        r.text
    );
    let listed = museum_agent::pipeline::follow_up::quoted_titles(&r.text);
    assert_eq!(listed.len(), 4, "{}", r.text);
    for t in &listed {
        assert!(says_japanese.iter().any(|j| j.trim() == t), "{t}");
    }
    // The visitor picks from that list.
    c.text_request("pick", "Tell me about the first one").await;
    let r = c.reply("pick").await;
    assert!(r.text.contains(&format!("“{}”", listed[0])), "{}", r.text);
    // A word found in no ceramic record: no narrowed kind, the search answers.
    c.text_request("martian", "Do you have any Martian ceramics?")
        .await;
    let r = c.reply("martian").await;
    assert!(!r.text.starts_with("Our collection has "), "{}", r.text);
    // The oldest of a kind: its dated members by date, the first named ("What is the oldest
    // ceramic bowl?" had been searched as a question about one exhibit).
    c.text_request("one", "What is the oldest ceramic bowl?")
        .await;
    let r = c.reply("one").await;
    assert!(
        r.text.starts_with("Of the ") && r.text.contains("dated exhibits in Ceramics"),
        "{}",
        r.text
    );
    assert!(r.text.contains(", the oldest is “"), "{}", r.text);

    // A model gets the total and the listed exhibits.
    let app = demo_app(LlmProviderKind::Openai).await;
    let mut c = app.client().await;
    app.llm.push(text_reply(&["We have many ceramics."]));
    c.text_request("m", "Do you have any ceramics?").await;
    c.reply("m").await;
    let sys = system_prompt(&app.llm.requests()[0]);
    assert!(
        sys.contains(&format!(
            "The collection holds {ceramics} exhibits in Ceramics"
        )),
        "{sys}"
    );
}

/// "What do you have?" is answered with the collection's total and its largest departments,
/// counted from the records; the department its example names is listed when asked; in Chinese
/// too.
#[tokio::test]
async fn a_question_about_the_whole_collection_gets_its_departments() {
    let records = records();
    let mut by: HashMap<&str, usize> = HashMap::new();
    for (_, d, _) in records.values() {
        *by.entry(d.as_str()).or_default() += 1;
    }
    let mut departments: Vec<(&str, usize)> =
        by.into_iter().filter(|(d, _)| !d.is_empty()).collect();
    departments.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let app = demo_app(LlmProviderKind::Offline).await;
    let mut c = app.client().await;
    c.text_request("all", "What do you have?").await;
    let r = c.reply("all").await;
    // 2700 → "2,700" (the demo's counts are under 1,000,000).
    let thousands = |n: usize| {
        let s = n.to_string();
        if s.len() > 3 {
            format!("{},{}", &s[..s.len() - 3], &s[s.len() - 3..])
        } else {
            s
        }
    };
    let total = thousands(records.len());
    // Departments named in Chinese only are counted, not named (an English voice cannot read
    // them); the others are named, largest first.
    let latin = |d: &str| d.chars().any(|c| c.is_ascii_alphabetic());
    let unnamed: usize = departments
        .iter()
        .filter(|(d, _)| !latin(d))
        .map(|(_, n)| n)
        .sum();
    let named: Vec<&(&str, usize)> = departments.iter().filter(|(d, _)| latin(d)).collect();
    assert!(unnamed > 0 && named.len() >= 2);
    assert!(
        r.text.starts_with(&format!(
            "Our collection records hold {total} exhibits. {} of them are catalogued under Chinese department names. The largest departments are {} ({}), {} ({}),",
            thousands(unnamed), named[0].0, named[0].1, named[1].0, named[1].1
        )),
        "{}",
        r.text
    );
    // Its example question names a department in English, and is answered with its exhibits.
    let example = r.text.split("for example: ").nth(1).unwrap().to_string();
    assert!(example.starts_with("Do you have anything in "), "{example}");
    c.text_request("example", &example).await;
    let list = c.reply("example").await;
    assert!(
        list.text.starts_with("Our collection has "),
        "{}",
        list.text
    );
    let mut zh = app.client().await;
    zh.text_request("all", "你们有哪些藏品？").await;
    let r = zh.reply("all").await;
    assert!(
        r.text.starts_with(&format!(
            "本馆的藏品资料共收录{}件展品。按类别，最多的是：",
            records.len()
        )),
        "{}",
        r.text
    );
}

/// Every department the Chinese overview names in Chinese (绘画与素描（Painting & Drawing）,
/// 金属器（Metal）) can be asked back in those words and gets the whole department: 金属器
/// was refused (the dictionary has no 金属器), 绘画与素描 listed only the paintings whose
/// record says sketch (素描's dictionary sense).
#[tokio::test]
async fn a_department_the_chinese_overview_names_can_be_asked_back() {
    let records = records();
    let mut by: HashMap<&str, usize> = HashMap::new();
    for (_, d, _) in records.values() {
        *by.entry(d.as_str()).or_default() += 1;
    }
    let named: Vec<(String, &str, usize)> = by
        .into_iter()
        .filter_map(|(d, n)| Some((kinds::department_in_chinese(d)?, d, n)))
        .collect();
    assert!(named.len() >= 10, "{named:?}");
    let app = demo_app(LlmProviderKind::Offline).await;
    let mut c = app.client().await;
    for (zh, d, n) in &named {
        let q = format!("有没有{zh}的展品？");
        c.text_request("kind", &q).await;
        let r = c.reply("kind").await;
        // 馆藏中有200件陶瓷…, or 馆藏中「…」类的展品有106件…
        let total: usize = r
            .text
            .strip_prefix("馆藏中")
            .and_then(|t| t.split('件').next())
            .and_then(|t| t.rsplit('有').next())
            .and_then(|t| t.parse().ok())
            .unwrap_or_else(|| panic!("{q} ({d}): {}", r.text));
        assert!(total >= *n, "{q} ({d}, {n}): {}", r.text);
        assert!(!r.text.contains("提到"), "{q} ({d}): narrowed: {}", r.text);
    }
}

/// A list of kinds ("porcelain and jade", 陶瓷和玉器) is answered with all of them and
/// examples of each (before: refused, no exhibit being both).
#[tokio::test]
async fn a_list_of_kinds_gets_all_of_them() {
    let records = records();
    let of = |m: &str| {
        records
            .values()
            .filter(|(_, _, h)| h.as_deref() == Some(m))
            .map(|(t, _, _)| t.as_str())
            .collect::<Vec<_>>()
    };
    let (porcelain, jade) = (of("porcelain"), of("jade"));
    assert!(porcelain.len() >= 2 && jade.len() >= 2);
    let app = demo_app(LlmProviderKind::Offline).await;
    let mut c = app.client().await;
    c.text_request("list", "Do you have porcelain and jade?")
        .await;
    let list = c.reply("list").await;
    assert!(
        list.text.starts_with(&format!(
            "Our collection has {} exhibits in porcelain / jade, for example: ",
            porcelain.len() + jade.len()
        )),
        "{}",
        list.text
    );
    let titles = museum_agent::pipeline::follow_up::quoted_titles(&list.text);
    assert!(
        titles.iter().any(|t| porcelain.contains(&t.as_str())),
        "{titles:?}"
    );
    assert!(
        titles.iter().any(|t| jade.contains(&t.as_str())),
        "{titles:?}"
    );
    c.text_request("zh", "有没有陶瓷和玉器？").await;
    let list = c.reply("zh").await;
    assert!(list.text.starts_with("馆藏中有"), "{}", list.text);
    assert!(list.text.contains("件陶瓷和玉器（"), "{}", list.text);
    let titles = museum_agent::pipeline::follow_up::quoted_titles(&list.text);
    assert!(
        titles.iter().any(|t| jade.contains(&t.as_str())),
        "{titles:?}"
    );
}

/// The system message a model gets for "Any more?" after it answered `question` with `listed`
/// (picks and requests for more read the titles an answer quotes).
async fn system_message_for_more(question: &str, listed: &str) -> String {
    let app = demo_app(LlmProviderKind::Openai).await;
    let mut c = app.client().await;
    app.llm.push(text_reply(&[listed]));
    app.llm.push(text_reply(&["Here are more: “A” and “B”."]));
    c.text_request("m", question).await;
    c.reply("m").await;
    c.text_request("m2", "Any more?").await;
    c.reply("m2").await;
    system_prompt(&app.llm.requests()[1])
}

/// "Any more?" after a list of a kind gets the kind's next few exhibits, none listed before,
/// and a pick reads the new list; 还有别的吗？ too; a model is told the visitor asks for more.
/// Before: "Sorry, I don't know" (searched as "Do you have any ceramics? Any more?").
#[tokio::test]
async fn more_of_a_list_gets_the_kinds_next_exhibits() {
    let records = records();
    let ceramic = |t: &str| {
        records
            .values()
            .any(|(title, d, m)| title == t && (d == "Ceramics" || m.as_deref() == Some("ceram")))
    };
    let total = records
        .values()
        .filter(|(_, d, m)| d == "Ceramics" || m.as_deref() == Some("ceram"))
        .count();
    let app = demo_app(LlmProviderKind::Offline).await;
    let mut c = app.client().await;
    c.text_request("list", "Do you have any ceramics?").await;
    let mut seen = museum_agent::pipeline::follow_up::quoted_titles(&c.reply("list").await.text);
    assert_eq!(seen.len(), 4);
    let mut last = Vec::new();
    for (id, q) in [("more", "Any more?"), ("again", "Show me some others")] {
        c.text_request(id, q).await;
        let r = c.reply(id).await;
        assert!(
            r.text
                .starts_with(&format!("More of the {total} exhibits in Ceramics: ")),
            "{q}: {}",
            r.text
        );
        let titles = museum_agent::pipeline::follow_up::quoted_titles(&r.text);
        assert_eq!(titles.len(), 4, "{q}: {}", r.text);
        for t in &titles {
            assert!(ceramic(t), "{q}: {t} is not a ceramic");
            assert!(!seen.contains(t), "{q}: {t} was listed before");
        }
        let shown = r.calls[0]["parameters"]["exhibit_id"].as_str().unwrap();
        assert_eq!(records[shown].0, titles[0]);
        seen.extend(titles.iter().cloned());
        last = titles;
    }
    c.text_request("pick", "Tell me about the second one").await;
    let r = c.reply("pick").await;
    assert!(r.text.contains(&last[1]), "{} → {}", last[1], r.text);

    let porcelain = records
        .values()
        .filter(|(_, _, m)| m.as_deref() == Some("porcelain"))
        .count();
    let mut zh = app.client().await;
    zh.text_request("list", "有没有瓷器？").await;
    let first = museum_agent::pipeline::follow_up::quoted_titles(&zh.reply("list").await.text);
    zh.text_request("more", "还有别的吗？").await;
    let r = zh.reply("more").await;
    assert!(
        r.text
            .starts_with(&format!("馆藏的{porcelain}件瓷器（porcelain）里，还有：")),
        "{}",
        r.text
    );
    let titles = museum_agent::pipeline::follow_up::quoted_titles(&r.text);
    assert!(titles.len() >= 2, "{}", r.text);
    assert!(
        titles.iter().all(|t| !first.contains(t)),
        "{first:?} {titles:?}"
    );

    // A model is told the exhibits are the next ones.
    let sys = system_message_for_more(
        "Do you have any ceramics?",
        "We have many ceramics, for example “Vase” and “Celadon Lamp”.",
    )
    .await;
    assert!(
        sys.contains("The visitor asks for more of the kind you listed"),
        "{sys}"
    );
}

/// "Any more?" after a list the search gave ("Do you have any swords?", no kind of that name)
/// gets the search's further matches near its best, none listed before; 還有別的嗎？ after a
/// pick from the list and a question about it too. Before: a list of unrelated exhibits
/// (还有别的吗 searched alone) or the same exhibit again.
#[tokio::test]
async fn more_of_a_search_list_gets_its_further_matches() {
    let app = demo_app(LlmProviderKind::Offline).await;
    let mut c = app.client().await;
    c.text_request("list", "Do you have any swords?").await;
    let first = museum_agent::pipeline::follow_up::quoted_titles(&c.reply("list").await.text);
    assert!(first.len() >= 2, "{first:?}");
    c.text_request("more", "Any more?").await;
    let r = c.reply("more").await;
    assert!(
        r.text.starts_with("Our collection also holds these: "),
        "{}",
        r.text
    );
    let more = museum_agent::pipeline::follow_up::quoted_titles(&r.text);
    assert!(!more.is_empty(), "{}", r.text);
    assert!(
        more.iter().all(|t| !first.contains(t)),
        "{first:?} {more:?}"
    );

    let mut zh = app.client().await;
    zh.text_request("list", "有沒有墓誌銘拓本？").await;
    let first = museum_agent::pipeline::follow_up::quoted_titles(&zh.reply("list").await.text);
    assert!(first.len() >= 2, "{first:?}");
    zh.text_request("pick", "第一件是什麼年代的？").await;
    zh.reply("pick").await;
    zh.text_request("more", "還有別的嗎？").await;
    let r = zh.reply("more").await;
    assert!(
        r.text.starts_with("館藏中與此相關的展品還有："),
        "{}",
        r.text
    );
    let more = museum_agent::pipeline::follow_up::quoted_titles(&r.text);
    assert!(more.len() >= 2, "{}", r.text);
    for t in &more {
        assert!(!first.contains(t), "{t} was listed before");
        assert!(t.contains("墓誌銘"), "{t}");
    }

    // A model is told the visitor asks for more.
    let sys = system_message_for_more(
        "Do you have any swords?",
        "We have “Long Sword” and “Short Sword”, among others.",
    )
    .await;
    assert!(
        sys.contains("The visitor asks for more of the exhibits you listed"),
        "{sys}"
    );
}

/// An English word of a kind reaches the kinds the Chinese catalogue names at the end of its
/// titles ("photographs" → 照片, "medals" → 勋章), said in English: "Any old photographs?" was
/// refused, "What medals do you have?" counted the 4 of Coins & Medals and none of the 勳章.
#[tokio::test]
async fn an_english_kind_reaches_the_chinese_catalogue() {
    let records = records();
    let titled = |head: &str| {
        records
            .values()
            .filter(|(t, _, _)| {
                kinds::markers("", "", t)
                    .split(' ')
                    .any(|m| m == format!("#t:{head}"))
            })
            .count()
    };
    let photos = titled("照片");
    assert!(photos >= 2, "{photos}");
    let app = demo_app(LlmProviderKind::Offline).await;
    let mut c = app.client().await;
    c.text_request("p", "Any old photographs?").await;
    let r = c.reply("p").await;
    assert!(
        r.text.starts_with(&format!(
            "Our collection has {photos} exhibits in photographs catalogued in Chinese, for example: "
        )),
        "{}",
        r.text
    );
    let medals = titled("勋章");
    let departmental = records
        .values()
        .filter(|(_, d, _)| d == "Coins & Medals")
        .count();
    c.text_request("m", "What medals do you have?").await;
    let r = c.reply("m").await;
    let total: usize = r
        .text
        .strip_prefix("Our collection has ")
        .and_then(|t| t.split(' ').next())
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("{}", r.text));
    assert!(total >= medals + departmental, "{}", r.text);
    assert!(
        r.text.contains("medals catalogued in Chinese"),
        "{}",
        r.text
    );
}

/// Where things come from names a list: "Anything from Japan?" lists the records whose
/// period field says Japan, 有古埃及的东西吗？ those that say Egypt, 有唐朝的文物吗？ the Tang
/// ones of both catalogues (唐 in a Chinese period field, "Tang" in an English one); a word that
/// is no origin is still searched (before: "Anything from Japan?" answered with a Chinese
/// rubbing, 有古埃及的东西吗？ was refused).
#[tokio::test]
async fn where_things_come_from_names_a_list() {
    let periods: HashMap<String, (String, String)> = std::fs::read_to_string(demo())
        .unwrap()
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            let s = |k: &str| v[k].as_str().unwrap_or("").to_string();
            (s("id"), (s("title"), s("culture_or_period")))
        })
        .collect();
    // From a country: the records whose origin field names it or its people's adjective
    // ("Japanese; Edo; place of origin: Kyoto").
    let from = |country: &str, adjective: &str| -> Vec<&String> {
        let markers = [
            kinds::origin_markers(country),
            kinds::origin_markers(adjective),
        ];
        periods
            .values()
            .filter(|(_, p)| {
                kinds::origin_markers(p)
                    .split(' ')
                    .any(|m| markers.iter().any(|k| k == m))
            })
            .map(|(t, _)| t)
            .collect()
    };
    let japan = from("Japan", "Japanese");
    let egypt = from("Egypt", "Egyptian");
    // China: the records whose origin is China or Chinese and the Chinese catalogue's records
    // dated by a dynasty (唐, 東漢, 清 …).
    let china = from("China", "Chinese");
    let dynasty = periods.values().filter(|(_, p)| p == "唐").count();
    assert!(china.len() > dynasty + 50, "{} {dynasty}", china.len());
    assert!(
        japan.len() >= 50 && egypt.len() >= 50,
        "{} {}",
        japan.len(),
        egypt.len()
    );
    let app = demo_app(LlmProviderKind::Offline).await;
    let mut c = app.client().await;
    for (id, q, head, members) in [
        (
            "ja",
            "Anything from Japan?",
            format!(
                "Our collection has {} exhibits from Japan, for example: ",
                japan.len()
            ),
            &japan,
        ),
        (
            "eg",
            "有古埃及的东西吗？",
            format!("馆藏中有{}件古埃及的展品，例如：", egypt.len()),
            &egypt,
        ),
        (
            "cn",
            "有中国的东西吗？",
            format!("馆藏中有{}件中国的展品，例如：", china.len()),
            &china,
        ),
    ] {
        c.text_request(id, q).await;
        let r = c.reply(id).await;
        assert!(r.text.starts_with(&head), "{q}: {}", r.text);
        let titles = museum_agent::pipeline::follow_up::quoted_titles(&r.text);
        assert_eq!(titles.len(), 4, "{q}: {titles:?}");
        for t in &titles {
            assert!(
                members.iter().any(|m| normalize(m) == normalize(t)),
                "{q}: {t} is not of that origin"
            );
        }
    }
    c.text_request("tang", "有唐朝的文物吗？").await;
    let r = c.reply("tang").await;
    let tang = periods
        .values()
        .filter(|(_, p)| p == "唐" || p.contains("Tang"))
        .count();
    assert!(
        r.text
            .starts_with(&format!("馆藏中有{tang}件唐朝的展品，例如：")),
        "{}",
        r.text
    );
    for t in museum_agent::pipeline::follow_up::quoted_titles(&r.text) {
        assert!(
            periods
                .values()
                .any(|(title, p)| normalize(title) == normalize(&t)
                    && (p == "唐" || p.contains("Tang"))),
            "{t} is not Tang"
        );
    }
    // Not an origin: searched as before.
    c.text_request("fr", "Do you have anything about the French Revolution?")
        .await;
    let r = c.reply("fr").await;
    assert!(!r.text.contains("exhibits from"), "{}", r.text);
    // No record's period says Taiwan, and no Chinese title's kind is a short word glossed
    // "Taiwan" (a committee's long name is glossed so: it listed "2 exhibits in 委员会 / 中国").
    c.text_request("tw", "Anything from Taiwan?").await;
    let r = c.reply("tw").await;
    assert!(!r.text.contains(" exhibits in "), "{}", r.text);

    // A model gets the origin's total and the listed exhibits.
    let app = demo_app(LlmProviderKind::Openai).await;
    let mut c = app.client().await;
    app.llm
        .push(text_reply(&["We have many things from Japan."]));
    c.text_request("m", "Anything from Japan?").await;
    c.reply("m").await;
    let sys = system_prompt(&app.llm.requests()[0]);
    assert!(
        sys.contains(&format!(
            "The collection holds {} exhibits whose records give their origin as japan",
            japan.len()
        )),
        "{sys}"
    );
}

/// "Do you have any swords?" (no department or medium of that name) gets a short list of the
/// matching exhibits (before: one record's passage); "the second one", 第二件, "and the last one?" pick from it, and the card shown is
/// the exhibit picked.
#[tokio::test]
async fn a_browse_question_gets_a_list_and_the_visitor_picks_from_it() {
    let records = records();
    let app = demo_app(LlmProviderKind::Offline).await;
    let mut c = app.client().await;
    c.text_request("list", "Do you have any swords?").await;
    let list = c.reply("list").await;
    assert!(
        list.text.starts_with("Our collection holds these: "),
        "{}",
        list.text
    );
    let titles = museum_agent::pipeline::follow_up::quoted_titles(&list.text);
    assert!((2..=4).contains(&titles.len()), "{titles:?}");
    let shown = |r: &Reply| r.calls[0]["parameters"]["exhibit_id"].clone();
    let title_of = |id: &serde_json::Value| records[id.as_str().unwrap()].0.clone();
    assert_eq!(title_of(&shown(&list)), titles[0]);
    c.text_request("second", "Tell me about the second one")
        .await;
    let r = c.reply("second").await;
    assert!(
        r.text.starts_with(&format!("“{}”", titles[1])),
        "named as the visitor's pick, not \"the closest match\": {} → {}",
        titles[1],
        r.text
    );
    assert_eq!(title_of(&shown(&r)), titles[1]);
    c.text_request("when", "When was it made?").await;
    let r = c.reply("when").await;
    assert!(r.text.contains(&titles[1]), "{}", r.text);
    c.text_request("last", "And the last one?").await;
    let r = c.reply("last").await;
    let last = titles.last().unwrap();
    assert!(r.text.contains(last.as_str()), "{last} → {}", r.text);
    assert_eq!(
        &title_of(&shown(&r)),
        last,
        "the card of the exhibit picked"
    );
    // In Chinese, over the peach-bloom porcelains of the issue.
    let mut zh = app.client().await;
    zh.text_request("list", "有没有康熙年间烧的那种豇豆红釉的瓷器？")
        .await;
    let list = zh.reply("list").await;
    assert!(
        list.text.starts_with("馆藏中与此相关的展品有："),
        "{}",
        list.text
    );
    let titles = museum_agent::pipeline::follow_up::quoted_titles(&list.text);
    assert!(titles[0].contains("Peach Bloom"), "{titles:?}");
    zh.text_request("second", "第二件是什么年代的？").await;
    let r = zh.reply("second").await;
    assert!(
        r.text.starts_with(&format!("《{}》的年代是", titles[1])),
        "{}",
        r.text
    );
}

/// "What is the oldest thing here?" lists the collection's dated exhibits oldest first, saying
/// how many the comparison counted and how many have no date; "Any more?" goes on by date, a
/// pick reads the list, 最古老的文物是什么？ too, and a model is told the order. Before: "I can't
/// rank or pick the exhibits for you" and the departments.
#[tokio::test]
async fn the_oldest_exhibits_are_listed_by_date() {
    use museum_agent::pipeline::follow_up::quoted_titles;
    use museum_agent::retrieval::dating::start_year;
    let text = std::fs::read_to_string(demo()).unwrap();
    let mut dated: Vec<(i32, String)> = text
        .lines()
        .filter_map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).ok()?;
            let y = start_year(v["date"].as_str()?, v["culture_or_period"].as_str()?)?;
            Some((y, v["title"].as_str()?.to_string()))
        })
        .collect();
    dated.sort();
    let total = text.lines().count();
    let records = records();

    let app = demo_app(LlmProviderKind::Offline).await;
    let mut c = app.client().await;
    c.text_request("old", "What is the oldest thing here?")
        .await;
    let r = c.reply("old").await;
    let head = format!(
        "Of the {} dated exhibits in our collection, the oldest is “{}”",
        museum_agent::util::thousands(dated.len()),
        dated[0].1
    );
    assert!(r.text.starts_with(&head), "{}", r.text);
    assert!(
        r.text.contains(&format!(
            "({} more have no date in their records",
            total - dated.len()
        )),
        "{}",
        r.text
    );
    let first = quoted_titles(&r.text);
    assert_eq!(first.len(), 4, "{}", r.text);
    let shown = r.calls[0]["parameters"]["exhibit_id"].as_str().unwrap();
    assert_eq!(records[shown].0, first[0]);

    c.text_request("more", "Any more?").await;
    let r = c.reply("more").await;
    assert!(r.text.starts_with("Next, by date: “"), "{}", r.text);
    let next = quoted_titles(&r.text);
    assert!(
        !next.is_empty() && next.iter().all(|t| !first.contains(t)),
        "{}",
        r.text
    );
    c.text_request("pick", "Tell me about the first one").await;
    let r = c.reply("pick").await;
    assert!(r.text.contains(&next[0]), "{} → {}", next[0], r.text);

    let mut zh = app.client().await;
    zh.text_request("zh", "最古老的文物是什么？").await;
    let r = zh.reply("zh").await;
    assert!(
        r.text.starts_with(&format!(
            "馆藏中有年代记载的{}件展品里，最古老的是《{}》",
            dated.len(),
            dated[0].1
        )),
        "{}",
        r.text
    );

    // A model gets the order and the counts.
    let app = demo_app(LlmProviderKind::Openai).await;
    let mut c = app.client().await;
    app.llm
        .push(text_reply(&["The oldest is a pair of armlets."]));
    c.text_request("m", "What's the newest thing in the museum?")
        .await;
    c.reply("m").await;
    let sys = system_prompt(&app.llm.requests()[0]);
    assert!(
        sys.contains(&format!(
            "The visitor asks for the most recent first of the collection. Of its {total} \
             exhibits, {} have a date",
            dated.len()
        )),
        "{sys}"
    );
}

/// "What is the biggest thing here?" lists the measured exhibits largest first with their
/// measurements, saying how many the comparison counted; 最小的展品是什么？ the smallest;
/// "Any more?" goes on by size; a model is told the order. Before: "What's the biggest
/// painting?" got a painting whose record says "the biggest sort of a crowd".
#[tokio::test]
async fn the_largest_exhibits_are_listed_by_size() {
    use museum_agent::pipeline::follow_up::quoted_titles;
    use museum_agent::retrieval::sizing::size_of;
    let text = std::fs::read_to_string(demo()).unwrap();
    let mut sized: Vec<(f64, String)> = text
        .lines()
        .filter_map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).ok()?;
            let s = size_of(v["dimensions"].as_str()?)?;
            Some((s.largest(), v["title"].as_str()?.to_string()))
        })
        .collect();
    sized.sort_by(|a, b| a.0.total_cmp(&b.0));
    assert!(
        sized[0].0 < sized[1].0 && sized[sized.len() - 2].0 < sized[sized.len() - 1].0,
        "the demo's smallest and largest are ties: pick other assertions"
    );
    let total = text.lines().count();
    let records = records();

    let app = demo_app(LlmProviderKind::Offline).await;
    let mut c = app.client().await;
    c.text_request("big", "What is the biggest thing here?")
        .await;
    let r = c.reply("big").await;
    let largest = &sized[sized.len() - 1].1;
    let head = format!(
        "Of the {} measured exhibits in our collection, the largest is “{largest}” (",
        museum_agent::util::thousands(sized.len()),
    );
    assert!(r.text.starts_with(&head), "{}", r.text);
    assert!(r.text.contains(" cm)"), "{}", r.text);
    let first = quoted_titles(&r.text);
    let shown = r.calls[0]["parameters"]["exhibit_id"].as_str().unwrap();
    assert_eq!(records[shown].0, first[0]);
    c.text_request("more", "Any more?").await;
    let r = c.reply("more").await;
    assert!(r.text.starts_with("Next, by size: “"), "{}", r.text);
    let next = quoted_titles(&r.text);
    assert!(
        !next.is_empty() && next.iter().all(|t| !first.contains(t)),
        "{}",
        r.text
    );

    let mut zh = app.client().await;
    zh.text_request("zh", "最小的展品是什么？").await;
    let r = zh.reply("zh").await;
    assert!(
        r.text.starts_with(&format!(
            "馆藏中有尺寸记载的{}件展品里，最小的是《{}》",
            sized.len(),
            sized[0].1
        )),
        "{}",
        r.text
    );

    // A model gets the order and the counts.
    let app = demo_app(LlmProviderKind::Openai).await;
    let mut c = app.client().await;
    app.llm.push(text_reply(&["The largest is a handscroll."]));
    c.text_request("m", "What's the largest object in the museum?")
        .await;
    c.reply("m").await;
    let sys = system_prompt(&app.llm.requests()[0]);
    assert!(
        sys.contains(&format!(
            "The visitor asks for the largest first of the collection. Of its {total} \
             exhibits, {} have measurements",
            sized.len()
        )),
        "{sys}"
    );
}

/// Follow-ups stay on the exhibit the guide's last answer named first, even when the words
/// of the first question rank other records above it ("Who made it?", the fourth question
/// about the mummy, was answered about a mummy mask, and 这件有多大？ about a scarab), and
/// an answer about that exhibit suggests no others ("The collection also holds …").
#[tokio::test]
async fn follow_ups_stay_on_the_exhibit_the_last_answer_named() {
    let app = demo_app(LlmProviderKind::Offline).await;
    let mut c = app.client().await;
    c.text_request("t", "Tell me about the mummy").await;
    let first = c.reply("t").await.text;
    let title = first
        .split('“')
        .nth(1)
        .and_then(|t| t.split('”').next())
        .unwrap_or_else(|| panic!("the first answer names no exhibit: {first}"))
        .to_string();
    for (id, q, want) in [
        ("big", "How big is it?", " measures "),
        ("where", "Where is it?", "places"),
        ("who", "Who made it?", "maker"),
        ("zh", "这件有多大？", "的尺寸是"),
    ] {
        c.text_request(id, q).await;
        let r = c.reply(id).await;
        assert!(
            r.text.contains(&title),
            "{q} → {} (not about {title})",
            r.text
        );
        assert!(r.text.contains(want), "{q} → {}", r.text);
        assert!(!r.text.contains("also holds"), "{q} → {}", r.text);
    }
    // The exhibit named by its kind ("this vase", 这件拓本) is the exhibit of the conversation
    // when its title says so: searched alone, the first was the Rubens Vase, the second refused.
    for (about, q, want) in [
        (
            "Tell me about the Vase with Apollo, a Nymph, and Cupid",
            "When was this vase made?",
            "“Vase with Apollo, a Nymph, and Cupid” is dated",
        ),
        (
            "介绍一下清石鼓文拓本",
            "这件拓本是什么年代的？",
            "《清石鼓文拓本》的年代是清",
        ),
    ] {
        let mut c = app.client().await;
        c.text_request("a", about).await;
        c.reply("a").await;
        c.text_request("q", q).await;
        let r = c.reply("q").await;
        assert!(r.text.starts_with(want), "{q} → {}", r.text);
        // At a fresh start it is an exhibit the guide cannot see.
        let mut fresh = app.client().await;
        fresh.text_request("q", q).await;
        let r = fresh.reply("q").await;
        assert_eq!(r.text, museum_agent::pipeline::follow_up::which_exhibit(q));
    }
}
