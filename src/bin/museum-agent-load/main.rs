//! `museum-agent-load`: the load tool. See [`load`] and the README's Performance section.
//! Bounded in count and time; loopback only. A binary of its own, outside the server's library:
//! it uses only `museum_agent`'s public API.

mod load;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::{Parser, Subcommand};
use load::scenarios::{self, Target};
use load::upstream::{FakeUpstream, UpstreamTiming};
use load::{Report, SpawnedServer};

#[derive(Parser)]
#[command(
    name = "museum-agent-load",
    about = "Load generator for servers speaking the museum agent protocol"
)]
struct Cli {
    /// Server URL (ws://127.0.0.1:PORT/ws/agent/stream). Not needed with --spawn. Several,
    /// comma-separated, are the nodes of one cluster (sharing their user store): the `resume`
    /// scenario resumes each session on the next node; the other scenarios use the first.
    #[arg(long, value_delimiter = ',')]
    url: Vec<String>,
    /// API key for REGISTER.
    #[arg(long, env = "MUSEUM_AGENT_LOAD_KEY")]
    api_key: Option<String>,
    /// The server's pid, to read its RSS and CPU (same machine); with several URLs, one per URL.
    #[arg(long, value_delimiter = ',')]
    pid: Vec<u32>,
    /// Start this museum-agent binary, pointed at the tool's own fake upstream.
    #[arg(long)]
    spawn: Option<PathBuf>,
    /// With --spawn: the spawned server(s) use the NATS hub backend at this URL.
    #[arg(long)]
    hub_nats: Option<String>,
    /// With --spawn: an environment variable for the spawned server(s), KEY=VALUE (repeatable),
    /// e.g. MUSEUM_AGENT__DATABASE__URL=postgres://… so that several nodes share their keys.
    #[arg(long, value_parser = parse_env)]
    server_env: Vec<(String, String)>,
    /// Write the figures as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Also run every scenario against a second server started from this shell command line
    /// (`{port}`, `{upstream}`, `{upstream_root}` filled in), and print first ÷ second, e.g.
    /// 'python3 ../shared/peer/py_server.py --port {port} --upstream {upstream_root} --api-key peer-key'
    #[arg(long, conflicts_with = "compare_url")]
    compare_spawn: Option<String>,
    /// Also run every scenario against this already running second server (point its LLM
    /// base URL at the fake upstream the tool prints).
    #[arg(long)]
    compare_url: Option<String>,
    /// API key for REGISTER on the second server.
    #[arg(long)]
    compare_api_key: Option<String>,
    /// With --compare-url: the second server's pid, to read its RSS and CPU.
    #[arg(long)]
    compare_pid: Option<u32>,
    /// With --compare-spawn: the WebSocket path of the second server.
    #[arg(long, default_value = "/ws/agent/stream")]
    compare_path: String,
    #[command(subcommand)]
    scenario: Scenario,
}

#[derive(Subcommand, Clone)]
enum Scenario {
    /// Raw WebSocket echo baseline (in-process server).
    Echo {
        #[arg(long, default_value_t = 50)]
        conns: usize,
        #[arg(long, default_value_t = 200)]
        messages: usize,
    },
    /// Hold N registered sessions for T seconds.
    Idle {
        #[arg(long, default_value_t = 1000)]
        sessions: usize,
        #[arg(long, default_value_t = 10.0)]
        seconds: f64,
        #[arg(long, default_value_t = 256)]
        concurrency: usize,
    },
    /// N sessions streaming replies; relay latency.
    Stream {
        #[arg(long, default_value_t = 100)]
        sessions: usize,
        #[arg(long, default_value_t = 3)]
        requests: usize,
        #[arg(long, default_value_t = 50)]
        chunks: usize,
        #[arg(long, default_value_t = 20.0)]
        rate: f64,
    },
    /// Requests interrupted at random points.
    Interrupt {
        #[arg(long, default_value_t = 50)]
        sessions: usize,
        #[arg(long, default_value_t = 5)]
        requests: usize,
    },
    /// Connect → register → request → disconnect cycles.
    Churn {
        #[arg(long, default_value_t = 2000)]
        cycles: usize,
        #[arg(long, default_value_t = 50)]
        concurrency: usize,
    },
    /// Concurrent voice uploads at real-time pace, answered with text and voice.
    Voice {
        #[arg(long, default_value_t = 20)]
        sessions: usize,
        #[arg(long, default_value_t = 2.0)]
        seconds: f64,
    },
    /// Agents sending to each other through the agent hub (needs `[hub] enabled`).
    Hub {
        #[arg(long, default_value_t = 1000)]
        agents: usize,
        #[arg(long, default_value_t = 10)]
        envs: usize,
        #[arg(long, default_value_t = 10.0)]
        seconds: f64,
        #[arg(long, default_value_t = 2.0)]
        warmup: f64,
        /// Messages per second over all agents; 0 = as fast as the window allows.
        #[arg(long, default_value_t = 0.0)]
        rate: f64,
        /// With --rate 0: messages each sender may have in flight.
        #[arg(long, default_value_t = 32)]
        window: usize,
        /// With --spawn and --hub-nats: server processes sharing the hub; each agent's
        /// successor is on the next process, so every message crosses processes.
        #[arg(long, default_value_t = 1)]
        processes: usize,
    },
    /// Streaming sessions whose sockets are cut at random points mid-reply and resume
    /// (REGISTER with `resume`), on the same node, or on the next of several (--url a,b or
    /// --nodes): REGISTER → first replayed frame, frames lost / duplicated / out of order.
    Resume {
        #[arg(long, default_value_t = 100)]
        sessions: usize,
        /// Socket cuts per session.
        #[arg(long, default_value_t = 10)]
        cuts: usize,
        #[arg(long, default_value_t = 50)]
        chunks: usize,
        /// Upstream chunks per second of each reply (0: at once).
        #[arg(long, default_value_t = 20.0)]
        rate: f64,
        /// Longest pause between a cut and the resume, in ms (uniform from 0).
        #[arg(long, default_value_t = 50.0)]
        away_ms: f64,
        /// Spoken replies (require_tts): voice seqs are checked too.
        #[arg(long)]
        voice: bool,
        /// Sessions connecting at a time at the start.
        #[arg(long, default_value_t = 256)]
        concurrency: usize,
        /// With --spawn: server processes; each resume goes to the next one. They must share
        /// their user store and sessions (--server-env for the database and cluster settings);
        /// the key is created on the first.
        #[arg(long, default_value_t = 1)]
        nodes: usize,
        /// Start every reply's first chunk at once (replies asked together then tick together:
        /// a burst of one chunk per session every period). By default each reply starts at a
        /// random offset within its first period, as visitors' questions do.
        #[arg(long)]
        lockstep: bool,
        /// Ask every session's first question right after it registered, so that all replies
        /// start, and end, within one chunk period of each other: a wave of reply ends (and
        /// their snapshot writes and next questions) every reply's length. By default each
        /// session waits a random part of one reply's length (chunks / rate) first, as visitors
        /// do not all ask at once.
        #[arg(long)]
        waves: bool,
        /// Write one CSV line per resume here (start, TCP connect, upgrade, ACK, first
        /// replayed frame), to line slow resumes up in time.
        #[arg(long)]
        phases: Option<PathBuf>,
    },
    /// echo, stream, interrupt, churn, voice and idle with their defaults, in one run.
    All,
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let nofile = museum_agent::util::raise_nofile_limit();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let epoch = Instant::now();
        let up = FakeUpstream::start(
            epoch,
            UpstreamTiming {
                chunks: 50,
                rate: 20.0,
            },
        )
        .await?;
        let mut spawned = None;
        let server_env = spawn_env(&cli);
        let nodes: Vec<Target> = match &cli.spawn {
            Some(bin) => {
                let s = SpawnedServer::start(bin, &up.base_url(), &server_env).await?;
                let t = s.target();
                spawned = Some(s);
                vec![t]
            }
            None => {
                anyhow::ensure!(!cli.url.is_empty(), "--url or --spawn is required");
                let api_key = cli
                    .api_key
                    .clone()
                    .ok_or_else(|| anyhow::anyhow!("--api-key is required with --url"))?;
                cli.url
                    .iter()
                    .enumerate()
                    .map(|(i, url)| Target {
                        url: url.clone(),
                        api_key: api_key.clone(),
                        pid: cli.pid.get(i).copied(),
                    })
                    .collect()
            }
        };
        for t in &nodes {
            anyhow::ensure!(
                t.url.contains("://127.")
                    || t.url.contains("://localhost")
                    || t.url.contains("://[::1]"),
                "loopback targets only"
            );
        }
        let target = nodes[0].clone();
        let mut compare_server = None;
        let compare = match (&cli.compare_spawn, &cli.compare_url) {
            (Some(cmd), _) => {
                let key = cli.compare_api_key.clone().unwrap_or_default();
                let s = load::compare::CommandServer::start(
                    cmd,
                    &up.base_url(),
                    &key,
                    &cli.compare_path,
                )
                .await?;
                let t = s.target.clone();
                compare_server = Some(s);
                Some(t)
            }
            (None, Some(url)) => Some(Target {
                url: url.clone(),
                api_key: cli.compare_api_key.clone().ok_or_else(|| {
                    anyhow::anyhow!("--compare-api-key is required with --compare-url")
                })?,
                pid: cli.compare_pid,
            }),
            (None, None) => None,
        };
        if let Some(c) = &compare {
            anyhow::ensure!(
                c.url.contains("://127.") || c.url.contains("://localhost"),
                "loopback targets only"
            );
        }
        if spawned.is_none() || cli.compare_url.is_some() {
            eprintln!(
                "fake upstream for the server under test: {} (point its [llm] base_url here)",
                up.base_url()
            );
        }
        eprintln!("open-file limit: {nofile}");
        let mut reports: Vec<Report> = Vec::new();
        let mut extra_servers: Vec<SpawnedServer> = Vec::new();
        let scenarios = match cli.scenario {
            Scenario::All => vec![
                Scenario::Echo {
                    conns: 50,
                    messages: 200,
                },
                Scenario::Stream {
                    sessions: 100,
                    requests: 3,
                    chunks: 50,
                    rate: 20.0,
                },
                Scenario::Interrupt {
                    sessions: 50,
                    requests: 5,
                },
                Scenario::Churn {
                    cycles: 2000,
                    concurrency: 50,
                },
                Scenario::Voice {
                    sessions: 20,
                    seconds: 2.0,
                },
                Scenario::Idle {
                    sessions: 1000,
                    seconds: 10.0,
                    concurrency: 256,
                },
            ],
            s => vec![s],
        };
        let mut ratios = Vec::new();
        let runs: Vec<(&str, Target)> = std::iter::once(("first", target.clone()))
            .chain(compare.clone().map(|c| ("second", c)))
            .collect();
        let pairs = scenarios
            .into_iter()
            .flat_map(|s| runs.iter().map(move |(w, t)| (s.clone(), *w, t.clone())));
        let mut pair: Vec<Report> = Vec::new();
        for (s, which, target) in pairs {
            let r = match s {
                Scenario::Echo { conns, messages } => scenarios::echo(conns, messages).await?,
                Scenario::Idle {
                    sessions,
                    seconds,
                    concurrency,
                } => {
                    scenarios::idle(
                        &target,
                        sessions,
                        Duration::from_secs_f64(seconds),
                        concurrency,
                    )
                    .await?
                }
                Scenario::Stream {
                    sessions,
                    requests,
                    chunks,
                    rate,
                } => {
                    scenarios::stream(&target, &up, epoch, sessions, requests, chunks, rate).await?
                }
                Scenario::Interrupt { sessions, requests } => {
                    scenarios::interrupt(&target, &up, sessions, requests).await?
                }
                Scenario::Churn {
                    cycles,
                    concurrency,
                } => scenarios::churn(&target, &up, cycles, concurrency).await?,
                Scenario::Voice { sessions, seconds } => {
                    scenarios::voice(&target, &up, sessions, seconds).await?
                }
                Scenario::Resume {
                    sessions,
                    cuts,
                    chunks,
                    rate,
                    away_ms,
                    voice,
                    concurrency,
                    nodes: n,
                    lockstep,
                    waves,
                    phases,
                } => {
                    if let Some(path) = phases {
                        let _ = load::resume::PHASES.set(path);
                    }
                    up.set_stagger(!lockstep);
                    let mut targets = if which == "first" {
                        nodes.clone()
                    } else {
                        vec![target.clone()]
                    };
                    if n > 1 && which == "first" {
                        let Some(bin) = &cli.spawn else {
                            anyhow::bail!("--nodes needs --spawn (or give several --url)");
                        };
                        for _ in 1..n {
                            let s = SpawnedServer::start_with_key(
                                bin,
                                &up.base_url(),
                                &server_env,
                                Some(&target.api_key),
                            )
                            .await?;
                            targets.push(s.target());
                            extra_servers.push(s);
                        }
                    }
                    let mut r = load::resume::resume(
                        &targets,
                        &up,
                        epoch,
                        load::resume::ResumeParams {
                            sessions,
                            cuts,
                            chunks,
                            rate,
                            away_ms,
                            voice,
                            concurrency,
                            spread: !waves,
                        },
                    )
                    .await?;
                    up.set_stagger(false);
                    r.params["staggered"] = serde_json::json!(!lockstep);
                    r.params["spread"] = serde_json::json!(!waves);
                    r
                }
                Scenario::Hub {
                    agents,
                    envs,
                    seconds,
                    warmup,
                    rate,
                    window,
                    processes,
                } => {
                    let mut targets = vec![target.clone()];
                    if processes > 1 && which == "first" {
                        let (Some(bin), Some(_)) = (&cli.spawn, &cli.hub_nats) else {
                            anyhow::bail!("--processes needs --spawn and --hub-nats");
                        };
                        for _ in 1..processes {
                            let s = SpawnedServer::start(bin, &up.base_url(), &server_env).await?;
                            targets.push(s.target());
                            extra_servers.push(s);
                        }
                    }
                    load::hub::hub(
                        &targets,
                        load::hub::HubParams {
                            agents,
                            envs,
                            seconds,
                            warmup,
                            rate,
                            window,
                        },
                    )
                    .await?
                }
                Scenario::All => unreachable!(),
            };
            if compare.is_some() {
                println!("-- {which} server: {}", target.url);
            }
            print!("{}", r.table());
            pair.push(r);
            if pair.len() == runs.len() {
                if let [a, b] = &pair[..] {
                    let (text, v) = load::compare::ratio_table(a, b, ("first", "second"));
                    print!("{text}");
                    ratios.push(v);
                }
                reports.append(&mut pair);
            }
        }
        if let Some(path) = &cli.json {
            let v = serde_json::json!({
                "date": museum_agent::util::now_ms(),
                "target": target.url,
                "compare_target": compare.as_ref().map(|c| c.url.clone()),
                "reports": reports.iter().map(Report::json).collect::<Vec<_>>(),
                "ratios": ratios,
            });
            std::fs::write(path, serde_json::to_string_pretty(&v)?)?;
        }
        if let Some(mut s) = spawned {
            let _ = s.child.kill().await;
        }
        if let Some(mut s) = compare_server {
            let _ = s.child.kill().await;
        }
        for mut s in extra_servers {
            let _ = s.child.kill().await;
        }
        anyhow::Ok(())
    })
}

/// Environment for spawned servers: the NATS hub backend, then `--server-env`.
fn spawn_env(cli: &Cli) -> Vec<(String, String)> {
    let mut env = nats_env(&cli.hub_nats);
    env.extend(cli.server_env.iter().cloned());
    env
}

fn parse_env(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
        _ => Err(format!("{s:?} is not KEY=VALUE")),
    }
}

/// Environment for spawned servers that use the NATS hub backend.
fn nats_env(url: &Option<String>) -> Vec<(String, String)> {
    match url {
        Some(u) => vec![
            ("MUSEUM_AGENT__HUB__BACKEND".into(), "nats".into()),
            ("MUSEUM_AGENT__HUB__NATS_URL".into(), u.clone()),
        ],
        None => vec![],
    }
}
