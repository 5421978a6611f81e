//! Answers that are not a plain search of the question: small talk ("hello", "thanks", "what
//! can you do?") answered without a search, a follow-up ("When was it made?") searched with the
//! question it follows, and visitor services answered from the facts file (`[srs] facts_path`), never from exhibit
//! records: the fact is said word for word in the visitor's language, with or without an LLM
//! (`facts_verbatim`, the default); with `facts_verbatim = false` an LLM gets it as the prompt's
//! authority with no exhibit passages; exhibit questions that share a word still reach the
//! collection, and an edited file is picked up while the server runs.

use std::path::{Path, PathBuf};
use std::time::Duration;

use museum_agent::config::LlmProviderKind;

use crate::support::fake_llm::{Script, finish_chunk, system_prompt, text_reply, tool_chunk};
use crate::support::*;

const HELEN: &str = "walters-17593";
const EXAMPLE: &str = "fixtures/facts/example-museum-facts.toml";

/// "Toilet of Helen" and 30 other records of the demo collection.
fn collection(dir: &Path) -> PathBuf {
    let all = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/collection/exhibits.jsonl"),
    )
    .unwrap();
    let mut lines: Vec<&str> = all
        .lines()
        .filter(|l| l.contains(&format!("\"id\": \"{HELEN}\"")))
        .collect();
    assert_eq!(lines.len(), 1);
    lines.extend(all.lines().take(30));
    let path = dir.join("demo.jsonl");
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    path
}

fn example_text() -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(EXAMPLE)).unwrap()
}

/// A server over the small collection, with the facts file at `facts`.
async fn app(provider: LlmProviderKind, facts: PathBuf) -> (TestApp, tempfile::TempDir) {
    app_with(provider, facts, true).await
}

async fn app_with(
    provider: LlmProviderKind,
    facts: PathBuf,
    verbatim: bool,
) -> (TestApp, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let path = collection(dir.path());
    let app = spawn_app_with(move |c| {
        c.srs.load_demo = true;
        c.srs.demo_path = path;
        c.srs.facts_path = facts;
        c.srs.facts_verbatim = verbatim;
        if provider != LlmProviderKind::Openai {
            c.llm.provider = provider;
        }
    })
    .await;
    (app, dir)
}

fn example_facts() -> Vec<museum_agent::retrieval::facts::Fact> {
    museum_agent::retrieval::facts::parse(&example_text()).unwrap()
}

fn fact(topic: &str) -> museum_agent::retrieval::facts::Fact {
    example_facts()
        .into_iter()
        .find(|f| f.topic == topic)
        .unwrap()
}

#[tokio::test]
async fn the_offline_answerer_gives_the_facts_in_the_visitors_language_and_no_exhibit() {
    let facts = Path::new(env!("CARGO_MANIFEST_DIR")).join(EXAMPLE);
    let (app, _d) = app(LlmProviderKind::Offline, facts).await;
    let mut c = app.client().await;
    let toilets = fact("toilets");

    c.text_request("en", "Where are the toilets?").await;
    let r = c.reply("en").await;
    assert_eq!(r.text, toilets.en);
    assert!(r.calls.is_empty(), "no exhibit shown: {:?}", r.calls);
    assert!(!r.text.contains("Helen"), "{}", r.text);

    // Word for word, in the visitor's script.
    let hant = museum_agent::retrieval::text::to_traditional(&toilets.zh);
    assert_ne!(hant, toilets.zh);
    for (id, q, want) in [
        ("zh", "洗手间在哪里？", &toilets.zh),
        ("zh-hant", "洗手間在哪裡？", &hant),
    ] {
        c.text_request(id, q).await;
        let r = c.reply(id).await;
        assert_eq!(&r.text, want, "{q}");
        assert!(r.calls.is_empty());
    }

    c.text_request("hours", "What time does the museum close?")
        .await;
    assert_eq!(c.reply("hours").await.text, fact("hours").en);

    // An exhibit question that shares the word still gets the painting.
    c.text_request("helen", "Who painted Toilet of Helen?")
        .await;
    let r = c.reply("helen").await;
    assert!(r.text.contains("Toilet of Helen"), "{}", r.text);
    assert!(r.text.contains("Burroughs"), "{}", r.text);
    assert!(app.llm.requests().is_empty(), "no model was called");
}

#[tokio::test]
async fn with_an_llm_the_facts_are_still_said_word_for_word_and_the_model_is_not_called() {
    let facts = Path::new(env!("CARGO_MANIFEST_DIR")).join(EXAMPLE);
    let (app, _d) = app(LlmProviderKind::Openai, facts).await;
    let mut c = app.client().await;
    c.text_request("hours", "What time does the museum close?")
        .await;
    assert_eq!(c.reply("hours").await.text, fact("hours").en);
    let hant = museum_agent::retrieval::text::to_traditional(&fact("toilets").zh);
    c.text_request("zh", "洗手間在哪裡？").await;
    assert_eq!(c.reply("zh").await.text, hant);
    assert!(app.llm.requests().is_empty(), "no model was called");

    // The next exhibit question goes to the model as usual, with the fact turns in its history.
    app.llm
        .push(text_reply(&["A painting by Bryson Burroughs."]));
    c.text_request("h", "Tell me about the Toilet of Helen")
        .await;
    assert_eq!(c.reply("h").await.text, "A painting by Bryson Burroughs.");
    let reqs = app.llm.requests();
    assert_eq!(reqs.len(), 1);
    let roles: Vec<&str> = reqs[0]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles,
        ["system", "user", "assistant", "user", "assistant", "user"]
    );
    assert_eq!(reqs[0]["messages"][2]["content"], fact("hours").en.as_str());
}

#[tokio::test]
async fn an_llm_gets_the_fact_as_the_authority_and_no_exhibit_passages() {
    let facts = Path::new(env!("CARGO_MANIFEST_DIR")).join(EXAMPLE);
    let (app, _d) = app_with(LlmProviderKind::Openai, facts, false).await;
    let mut c = app.client().await;
    app.llm.push(text_reply(&["Next to the main staircase."]));
    c.text_request("t", "Where are the toilets?").await;
    c.reply("t").await;
    app.llm
        .push(text_reply(&["A painting by Bryson Burroughs."]));
    c.text_request("h", "Tell me about the Toilet of Helen")
        .await;
    c.reply("h").await;
    let reqs = app.llm.requests();
    let sys = |i: usize| system_prompt(&reqs[i]);
    let toilets = fact("toilets");
    let first = sys(0);
    assert!(
        first.contains(&toilets.en) && first.contains(&toilets.zh),
        "{first}"
    );
    assert!(!first.contains(HELEN), "no exhibit passages: {first}");
    let second = sys(1);
    assert!(second.contains(&format!("[{HELEN}]")), "{second}");
    assert!(!second.contains(&toilets.en), "{second}");
}

#[tokio::test]
async fn small_talk_gets_a_reply_of_its_own_and_no_exhibit() {
    use museum_agent::pipeline::small_talk::{SmallTalk, answer};
    let facts = Path::new(env!("CARGO_MANIFEST_DIR")).join(EXAMPLE);
    let (app, _d) = app(LlmProviderKind::Offline, facts).await;
    let mut c = app.client().await;
    for (id, q, kind) in [
        ("hi", "你好！", SmallTalk::Greeting),
        ("thanks", "謝謝", SmallTalk::Thanks),
        ("help", "What can you do?", SmallTalk::Help),
        ("bye", "Thanks, bye!", SmallTalk::Goodbye),
    ] {
        c.text_request(id, q).await;
        let r = c.reply(id).await;
        assert_eq!(r.text, answer(kind, q, true), "{q}");
        assert!(
            r.calls.is_empty(),
            "no exhibit shown for {q}: {:?}",
            r.calls
        );
    }
    assert!(answer(SmallTalk::Thanks, "謝謝", true).contains("不客氣"));
    // A greeting that asks something is a question.
    c.text_request("helen", "Hello, who painted Toilet of Helen?")
        .await;
    let r = c.reply("helen").await;
    assert!(r.text.contains("Burroughs"), "{}", r.text);
}

#[tokio::test]
async fn an_llm_gets_small_talk_without_a_search_result() {
    let facts = Path::new(env!("CARGO_MANIFEST_DIR")).join(EXAMPLE);
    let (app, _d) = app(LlmProviderKind::Openai, facts).await;
    let mut c = app.client().await;
    app.llm.push(text_reply(&["Hello! Welcome to the museum."]));
    c.text_request("hi", "Hello!").await;
    assert_eq!(c.reply("hi").await.text, "Hello! Welcome to the museum.");
    let reqs = app.llm.requests();
    let sys = reqs[0]["messages"][0]["content"].as_str().unwrap();
    assert!(!sys.contains("found nothing"), "{sys}");
    assert!(!sys.contains("Exhibits from the museum"), "{sys}");
}

#[tokio::test]
async fn a_follow_up_is_about_the_exhibit_of_the_conversation() {
    let facts = Path::new(env!("CARGO_MANIFEST_DIR")).join(EXAMPLE);
    let (app, _d) = app(LlmProviderKind::Offline, facts).await;
    let mut c = app.client().await;
    c.text_request("t", "Tell me about the Toilet of Helen")
        .await;
    let first = c.reply("t").await.text;
    assert!(first.contains("Toilet of Helen"), "{first}");
    for (id, q, want) in [
        ("when", "When was it made?", "1914"),
        ("what", "What is it made of?", "oil on canvas"),
        ("where", "Where can I see it?", "Painting & Drawing"),
    ] {
        c.text_request(id, q).await;
        let r = c.reply(id).await;
        assert!(r.text.contains(want), "{q} → {}", r.text);
        assert!(r.text.contains("Toilet of Helen"), "{q} → {}", r.text);
    }
    // "Who owned it?": the exhibit and one word of its own is still about the exhibit (searched
    // alone it was refused, and became the topic of the next follow-up).
    c.text_request("owned", "Who owned it?").await;
    let r = c.reply("owned").await;
    assert!(r.text.contains("Toilet of Helen"), "{}", r.text);
    c.text_request("where2", "Where is it displayed?").await;
    let r = c.reply("where2").await;
    assert!(r.text.contains("Painting & Drawing"), "{}", r.text);
    // "The first one" after an answer about one exhibit is that exhibit; "the second one"
    // with no list to pick from is not searched (it found a rubbing through 第二).
    c.text_request("first", "When was the first one made?")
        .await;
    let r = c.reply("first").await;
    assert!(r.text.contains("1914"), "{}", r.text);
    c.text_request("second", "第二个是什么时候的？").await;
    let r = c.reply("second").await;
    assert!(r.text.starts_with("您指的是哪件展品"), "{}", r.text);
    assert!(r.calls.is_empty(), "{:?}", r.calls);
    // "Tell me more": the record's sentences that no answer quoted yet.
    c.text_request("more", "Tell me more").await;
    let more = c.reply("more").await.text;
    assert!(
        more.starts_with("More from our record of “Toilet of Helen"),
        "{more}"
    );
    let mut zh = app.client().await;
    zh.text_request("t", "介绍一下蒋夫人兰竹山水花卉册").await;
    zh.reply("t").await;
    zh.text_request("who", "它是谁画的？").await;
    let r = zh.reply("who").await;
    assert!(r.text.contains("兰竹山水花卉册"), "{}", r.text);
    // Without an earlier question the guide asks which exhibit is meant (searched alone,
    // "Where can I see it?" named a record that shares only generic words).
    let mut fresh = app.client().await;
    fresh.text_request("w", "Where can I see it?").await;
    let r = fresh.reply("w").await;
    assert_eq!(
        r.text,
        museum_agent::pipeline::follow_up::which_exhibit("Where can I see it?")
    );
    assert!(
        r.text.starts_with("Which exhibit do you mean?"),
        "{}",
        r.text
    );
    assert!(r.calls.is_empty(), "{:?}", r.calls);
}

/// The highlights name their exhibits' records (the example file's `exhibits`), the kiosk
/// shows the first one's card, and "the third one" is the third stop (it was "Which exhibit
/// do you mean?"). A Chinese visitor gets the same titles in their script.
#[tokio::test]
async fn the_highlights_name_their_exhibits_and_a_pick_reaches_them() {
    let facts = Path::new(env!("CARGO_MANIFEST_DIR")).join(EXAMPLE);
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/collection/exhibits.jsonl");
    let app = spawn_app_with(move |c| {
        c.srs.load_demo = true;
        c.srs.demo_path = demo;
        c.srs.facts_path = facts;
        c.llm.provider = LlmProviderKind::Offline;
    })
    .await;
    let ids = fact("highlights").exhibits;
    assert_eq!(ids.len(), 3, "the example names three stops");
    let mut c = app.client().await;
    c.text_request("h", "What should I see?").await;
    let r = c.reply("h").await;
    assert!(r.text.starts_with(&fact("highlights").en), "{}", r.text);
    assert!(
        r.text.ends_with(
            " In our collection records: “Unknown Woman Mummy”, “Child's Suit of Armor” and “清石鼓文拓本”."
        ),
        "{}",
        r.text
    );
    assert_eq!(r.calls.len(), 1, "{:?}", r.calls);
    assert_eq!(r.calls[0]["parameters"]["exhibit_id"], ids[0].as_str());
    c.text_request("third", "Tell me about the third one").await;
    let r = c.reply("third").await;
    assert!(
        r.text.starts_with("“清石鼓文拓本”, 清 (the Qing dynasty"),
        "{}",
        r.text
    );
    assert_eq!(r.calls[0]["parameters"]["exhibit_id"], ids[2].as_str());
    let mut zh = app.client().await;
    zh.text_request("h", "鎮館之寶是什麼？").await;
    let r = zh.reply("h").await;
    assert!(
        r.text.ends_with(
            "館藏資料：《Unknown Woman Mummy》、《Child's Suit of Armor》、《清石鼓文拓本》。"
        ),
        "{}",
        r.text
    );
    zh.text_request("second", "第二件是什麼年代的？").await;
    let r = zh.reply("second").await;
    assert!(r.text.contains("Child's Suit of Armor"), "{}", r.text);
    assert!(r.text.contains("1580-1620"), "{}", r.text);
}

/// Small talk about the collection that asks what is worth seeing ("What do you recommend?",
/// 有什么好看的？) gets the curators' highlights when the facts file has them, as "What should I
/// see?" does; it got the catalogue's figures and "I can't rank or pick the exhibits for you".
/// Without a highlights entry it still gets the figures, not "ask the staff".
#[tokio::test]
async fn what_is_worth_seeing_gets_the_curators_highlights_when_the_file_has_them() {
    let facts = Path::new(env!("CARGO_MANIFEST_DIR")).join(EXAMPLE);
    let (with, _d) = app(LlmProviderKind::Offline, facts).await;
    let mut c = with.client().await;
    let highlights = fact("highlights");
    for (id, q) in [
        ("rec", "What do you recommend?"),
        ("int", "Anything interesting?"),
    ] {
        c.text_request(id, q).await;
        let r = c.reply(id).await;
        // (The small collection here lacks the stops' records: no card, see the test above.)
        assert!(r.text.starts_with(&highlights.en), "{q}: {}", r.text);
    }
    c.text_request("zh", "有什么好看的？").await;
    let r = c.reply("zh").await;
    assert!(r.text.starts_with(&highlights.zh), "{}", r.text);
    // The collection's figures still answer what there is.
    c.text_request("many", "How many objects do you have?")
        .await;
    let r = c.reply("many").await;
    assert!(!r.text.contains(&highlights.en), "{}", r.text);

    let dir = tempfile::tempdir().unwrap();
    let only_toilets = dir.path().join("facts.toml");
    let toilets = fact("toilets");
    std::fs::write(
        &only_toilets,
        format!(
            "museum = \"Example Museum\"\n\n[[fact]]\ntopic = \"toilets\"\nen = {:?}\nzh = {:?}\n",
            toilets.en, toilets.zh
        ),
    )
    .unwrap();
    let (bare, _d2) = app(LlmProviderKind::Offline, only_toilets).await;
    let mut c = bare.client().await;
    c.text_request("rec", "What do you recommend?").await;
    let r = c.reply("rec").await;
    assert!(
        r.text
            .starts_with("I can't rank or pick the exhibits for you"),
        "{}",
        r.text
    );
}

/// A model that names an exhibit of the search without calling `show_exhibit` (SmolLM2 never
/// did) gets the card shown for it by the server; a reply that names none shows nothing; a
/// model that calls it itself is not doubled; the call is in the history like the model's own.
#[tokio::test]
async fn the_card_of_the_exhibit_a_model_names_is_shown() {
    let facts = Path::new(env!("CARGO_MANIFEST_DIR")).join(EXAMPLE);
    let (app, _d) = app(LlmProviderKind::Openai, facts).await;
    let mut c = app.client().await;
    app.llm.push(text_reply(&[
        "The Toilet of Helen was painted by Bryson Burroughs in 1914.",
    ]));
    c.text_request("named", "Tell me about the Toilet of Helen")
        .await;
    let r = c.reply("named").await;
    assert_eq!(r.calls.len(), 1, "{:?}", r.calls);
    assert_eq!(r.calls[0]["name"], "show_exhibit");
    assert_eq!(r.calls[0]["parameters"]["exhibit_id"], HELEN);
    // The next request's history carries the call and a result placeholder (vendors refuse an
    // assistant tool call without one).
    app.llm.push(text_reply(&["I do not know."]));
    c.text_request("none", "Who was Helen?").await;
    let r = c.reply("none").await;
    assert!(
        r.calls.is_empty(),
        "nothing named, nothing shown: {:?}",
        r.calls
    );
    let msgs = app.llm.requests()[1]["messages"].clone();
    let msgs = msgs.as_array().unwrap();
    let call = msgs
        .iter()
        .position(|m| m["tool_calls"][0]["function"]["name"] == "show_exhibit")
        .unwrap_or_else(|| panic!("{msgs:?}"));
    assert_eq!(msgs[call + 1]["role"], "tool", "{msgs:?}");
    // The model shows it itself: one call, its own.
    app.llm.push(Script::Stream {
        chunks: vec![
            tool_chunk(
                0,
                Some("m1"),
                Some("show_exhibit"),
                &format!("{{\"exhibit_id\": \"{HELEN}\"}}"),
            ),
            finish_chunk("tool_calls"),
        ],
        delay: Duration::ZERO,
        done: true,
    });
    c.text_request("own", "Show me the Toilet of Helen").await;
    let r = c.reply("own").await;
    assert_eq!(r.calls.len(), 1, "{:?}", r.calls);
    assert_eq!(r.calls[0]["call_id"], "m1");
}

#[tokio::test]
async fn an_llm_gets_the_exhibit_of_the_conversation_for_a_follow_up() {
    let facts = Path::new(env!("CARGO_MANIFEST_DIR")).join(EXAMPLE);
    let (app, _d) = app(LlmProviderKind::Openai, facts).await;
    let mut c = app.client().await;
    app.llm
        .push(text_reply(&["A painting by Bryson Burroughs."]));
    c.text_request("t", "Tell me about the Toilet of Helen")
        .await;
    c.reply("t").await;
    app.llm.push(text_reply(&["In 1914."]));
    c.text_request("w", "When was it made?").await;
    c.reply("w").await;
    let sys = system_prompt(&app.llm.requests()[1]);
    assert!(sys.contains(&format!("[{HELEN}]")), "{sys}");
}

#[tokio::test]
async fn a_service_topic_the_file_lacks_is_not_answered_with_an_exhibit() {
    use museum_agent::retrieval::facts::no_entry_answer;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("facts.toml");
    let hours = example_text()
        .split("[[fact]]")
        .find(|block| block.contains("topic = \"hours\""))
        .unwrap()
        .to_string();
    std::fs::write(&path, format!("[[fact]]{hours}")).unwrap();
    let (app, _d) = app(LlmProviderKind::Openai, path).await;
    let mut c = app.client().await;
    for (id, q, want) in [
        (
            "park",
            "Is there parking?",
            no_entry_answer(false).to_string(),
        ),
        (
            "dog",
            "Can I bring my dog?",
            no_entry_answer(false).to_string(),
        ),
        (
            "wc",
            "洗手間在哪裡？",
            museum_agent::retrieval::text::to_traditional(no_entry_answer(true)),
        ),
    ] {
        c.text_request(id, q).await;
        let r = c.reply(id).await;
        assert_eq!(r.text, want, "{q}");
        assert!(r.calls.is_empty(), "{q}: {:?}", r.calls);
    }
    c.text_request("hours", "What time does the museum close?")
        .await;
    assert_eq!(c.reply("hours").await.text, fact("hours").en);
    assert!(app.llm.requests().is_empty(), "no model was called");
}

/// Asks `q` until the reply is `want`, or fails after 10 s (the file is checked every 2 s).
async fn until_answer(c: &mut Client, q: &str, want: &str) {
    let until = tokio::time::Instant::now() + Duration::from_secs(10);
    let mut n = 0;
    loop {
        n += 1;
        let id = format!("q{n}");
        c.text_request(&id, q).await;
        let got = c.reply(&id).await.text;
        if got == want {
            return;
        }
        assert!(
            tokio::time::Instant::now() < until,
            "still {got:?}, want {want:?}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

#[tokio::test]
async fn an_edited_facts_file_is_picked_up_while_the_server_runs() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("facts.toml");
    std::fs::write(&path, example_text()).unwrap();
    let (app, _d) = app(LlmProviderKind::Offline, path.clone()).await;
    let mut c = app.client().await;
    let wifi = fact("wifi");
    until_answer(&mut c, "Is there free Wi-Fi?", &wifi.en).await;

    let edited = example_text().replace("ExampleMuseum-Guest", "Edited-Network");
    assert_ne!(edited, example_text());
    std::fs::write(&path, &edited).unwrap();
    let new_wifi = wifi.en.replace("ExampleMuseum-Guest", "Edited-Network");
    until_answer(&mut c, "Is there free Wi-Fi?", &new_wifi).await;

    // (A broken edit keeping the previous facts: the unit test in src/retrieval/facts/mod.rs.)
    let zh = wifi.zh.replace("ExampleMuseum-Guest", "Edited-Network");
    until_answer(&mut c, "有无线网络吗？", &zh).await;
}
