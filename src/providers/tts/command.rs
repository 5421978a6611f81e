//! A local synthesis program run once per piece, so a kiosk can speak with no TTS server at all:
//! `flite -voice slt -t {text} -o /dev/stdout`, `espeak-ng --stdout {text}`,
//! `piper --model VOICE.onnx --output-raw` (text on stdin), ...
//!
//! The program is started directly (no shell), its argv taken from `[tts] command`; an argument
//! containing `{text}` gets the piece in its place, otherwise the piece is written to the
//! program's stdin. Its stdout is read as it is produced: `wav` (any rate and channel count, as
//! flite and espeak-ng write it) or raw s16le mono `pcm` at the configured rate (piper's
//! `--output-raw`), resampled to 16 kHz with the project's resampler. Dropping the stream (an
//! INTERRUPT, a timeout of the pipeline) kills the program (`kill_on_drop`); so does
//! `command_timeout_seconds`. A program that cannot be started, exits non-zero or writes no
//! audio gives a [`TtsError`] (the client gets ERROR INTERNAL_ERROR, as for a failing server).
//!
//! Only the program itself is killed: a shell wrapper should `exec` the real program.

use std::process::Stdio;
use std::time::Duration;

use bytes::Bytes;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::openai::{Decoder, SpeechFormat, async_stream, has_speakable};
use super::{PcmStream, TtsError, TtsProvider};

/// The placeholder an argument may contain.
pub const TEXT_PLACEHOLDER: &str = "{text}";

/// Most bytes of the program's stderr kept for the error message.
const STDERR_KEEP: usize = 400;

#[derive(Debug, Clone)]
pub struct CommandTtsOptions {
    /// Program and arguments (`argv[0]` is looked up in `PATH`).
    pub argv: Vec<String>,
    /// What the program writes to stdout.
    pub format: SpeechFormat,
    /// The longest a program may run for one piece.
    pub timeout: Duration,
}

#[derive(Debug, Clone)]
pub struct CommandTts {
    o: CommandTtsOptions,
}

impl CommandTts {
    pub fn new(o: CommandTtsOptions) -> Result<Self, TtsError> {
        if o.argv.first().is_none_or(|p| p.is_empty()) {
            return Err(TtsError::Connect("tts.command names no program".into()));
        }
        Ok(CommandTts { o })
    }

    /// The argv for one piece, and whether the piece goes to stdin instead.
    pub fn argv_for(&self, text: &str) -> (Vec<String>, bool) {
        // No NUL can be passed in an argument; a leading '-' would read as an option.
        let mut text = text.replace('\0', " ");
        if text.starts_with('-') {
            text.insert(0, ' ');
        }
        let uses_placeholder = self.o.argv.iter().any(|a| a.contains(TEXT_PLACEHOLDER));
        let argv = self
            .o
            .argv
            .iter()
            .map(|a| a.replace(TEXT_PLACEHOLDER, &text))
            .collect();
        (argv, !uses_placeholder)
    }
}

impl TtsProvider for CommandTts {
    fn name(&self) -> &'static str {
        "command"
    }

    fn synthesize(&self, text: String) -> PcmStream {
        if !has_speakable(&text) {
            return Box::pin(futures_util::stream::empty());
        }
        let (argv, stdin_text) = self.argv_for(&text);
        let format = self.o.format;
        let timeout = self.o.timeout;
        let stream = async_stream(move |tx| async move {
            let program = argv[0].clone();
            let mut decoder =
                Decoder::new(format).map_err(|e| TtsError::Malformed(e.to_string()))?;
            let mut cmd = tokio::process::Command::new(&program);
            cmd.args(&argv[1..])
                .stdin(if stdin_text {
                    Stdio::piped()
                } else {
                    Stdio::null()
                })
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .kill_on_drop(true);
            let mut child = cmd
                .spawn()
                .map_err(|e| TtsError::Connect(format!("cannot start {program}: {e}")))?;
            let deadline = tokio::time::sleep(timeout);
            tokio::pin!(deadline);
            let timed_out = || {
                TtsError::Timeout(format!(
                    "{program} ran longer than {}s",
                    timeout.as_secs_f64()
                ))
            };

            if let Some(mut stdin) = child.stdin.take() {
                let write = async {
                    stdin.write_all(text.as_bytes()).await?;
                    stdin.write_all(b"\n").await?;
                    stdin.shutdown().await
                };
                tokio::select! {
                    r = write => {
                        // A program that exits without reading its input is judged by its
                        // exit status and output below.
                        let _ = r;
                    }
                    _ = &mut deadline => return Err(timed_out()),
                }
            }
            // stderr is collected beside stdout (so a chatty program never blocks on a full
            // pipe); only its tail is kept for the message.
            let mut stderr = child.stderr.take().expect("stderr is piped");
            let stderr_task = async move {
                let mut kept = Vec::new();
                let mut buf = [0u8; 1024];
                while let Ok(n) = stderr.read(&mut buf).await {
                    if n == 0 {
                        break;
                    }
                    kept.extend_from_slice(&buf[..n]);
                    if kept.len() > STDERR_KEEP * 2 {
                        kept.drain(..kept.len() - STDERR_KEEP);
                    }
                }
                kept
            };
            let mut stdout = child.stdout.take().expect("stdout is piped");
            let read_all = async {
                let mut any = false;
                let mut buf = vec![0u8; 16 * 1024];
                loop {
                    let n = stdout
                        .read(&mut buf)
                        .await
                        .map_err(|e| TtsError::Closed(format!("reading {program}: {e}")))?;
                    if n == 0 {
                        return Ok(any);
                    }
                    any = true;
                    let pcm = decoder
                        .push(&buf[..n])
                        .map_err(|e| TtsError::Malformed(format!("{program}: {e}")))?;
                    if !pcm.is_empty() && tx.send(Ok(Bytes::from(pcm))).await.is_err() {
                        // The reader went away: stop (the program is killed on drop).
                        return Ok(any);
                    }
                }
            };
            let (any, err_tail) = tokio::select! {
                r = async { tokio::join!(read_all, stderr_task) } => {
                    let (any, tail) = r;
                    (any?, tail)
                }
                _ = &mut deadline => return Err(timed_out()),
            };
            if tx.is_closed() {
                return Ok(());
            }
            let status = tokio::select! {
                s = child.wait() => s.map_err(|e| TtsError::Closed(format!("{program}: {e}")))?,
                _ = &mut deadline => return Err(timed_out()),
            };
            let stderr_text = String::from_utf8_lossy(&err_tail).trim().to_string();
            if !status.success() {
                let mut msg = format!("{program} failed ({status})");
                if !stderr_text.is_empty() {
                    let tail: String = stderr_text
                        .chars()
                        .rev()
                        .take(STDERR_KEEP)
                        .collect::<Vec<_>>()
                        .into_iter()
                        .rev()
                        .collect();
                    msg.push_str(": ");
                    msg.push_str(&tail);
                }
                return Err(TtsError::Closed(msg));
            }
            if !any {
                return Err(TtsError::Malformed(format!("{program} wrote no audio")));
            }
            let tail = decoder
                .finish()
                .map_err(|e| TtsError::Malformed(format!("{program}: {e}")))?;
            if !tail.is_empty() {
                let _ = tx.send(Ok(Bytes::from(tail))).await;
            }
            Ok(())
        });
        Box::pin(stream)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tts(argv: &[&str]) -> CommandTts {
        CommandTts::new(CommandTtsOptions {
            argv: argv.iter().map(|s| s.to_string()).collect(),
            format: SpeechFormat::Wav,
            timeout: Duration::from_secs(5),
        })
        .unwrap()
    }

    #[test]
    fn the_piece_goes_into_the_placeholder_or_to_stdin() {
        let t = tts(&["flite", "-t", "{text}", "-o", "/dev/stdout"]);
        let (argv, stdin) = t.argv_for("Hello.");
        assert_eq!(argv, ["flite", "-t", "Hello.", "-o", "/dev/stdout"]);
        assert!(!stdin);
        let (argv, _) = t.argv_for("-o /etc/passwd\0x");
        assert_eq!(argv[2], " -o /etc/passwd x", "never read as an option");
        let t = tts(&["piper", "--output-raw"]);
        let (argv, stdin) = t.argv_for("Hello.");
        assert_eq!(argv, ["piper", "--output-raw"]);
        assert!(stdin);
        assert!(
            CommandTts::new(CommandTtsOptions {
                argv: vec![],
                format: SpeechFormat::Wav,
                timeout: Duration::from_secs(1)
            })
            .is_err()
        );
    }
}
