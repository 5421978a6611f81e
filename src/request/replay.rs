//! One session's replay buffer: the frames of its replies that the client may not have yet,
//! so a client that resumes the session (docs/protocol.md "Session resume") gets every frame
//! it missed, in order, once. Pure: no I/O, no clock, no tokio.
//!
//! A frame is kept from the moment it is queued until the client has it for sure: a WebSocket
//! pong answering a ping written after it (the outbox's business), or the `last_seen` of a
//! resume covering it. While the client is connected and answers pings that is a fraction of a
//! second of frames; while it is away, everything its replies produce. The buffer is allocated
//! only while it holds something (an idle session carries one empty `Option`).
//!
//! # Sequencing
//! Frames are identified per request by what they carry: a text frame by its
//! `text_stream_seq`, a voice frame by its `voice_stream_seq` (one carrying both by either),
//! and a frame with neither (the transcript, a `function_call`) by its rank among those
//! *unsequenced* frames of its request (0, 1, ...). End frames (any `-1`, or an ERROR with the
//! request id) are never "seen": a client that saw a request's end does not list it.
//! The client's `last_seen[request] = [text, voice, unsequenced?]` proves a frame seen when its
//! text seq ≤ `text`, or its voice seq ≤ `voice`, or its rank < `unsequenced`; since frames
//! arrive in order, every frame of that request up to the last one proven seen was seen too,
//! and everything after it is replayed.

use std::collections::VecDeque;
use std::sync::Arc;

use crate::protocol::SeenUpTo;

use super::inflight::RequestCtx;

/// Where a frame sits in its request's streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameKey {
    pub text: Option<i64>,
    pub voice: Option<i64>,
    /// Rank among the request's frames with neither seq; None for sequenced frames.
    pub unsequenced: Option<u32>,
    /// The request's last frame (a `-1`, an interrupted frame, or an ERROR).
    pub end: bool,
}

impl FrameKey {
    pub fn text(seq: i64) -> Self {
        FrameKey {
            text: Some(seq),
            voice: None,
            unsequenced: None,
            end: seq == -1,
        }
    }

    pub fn end() -> Self {
        FrameKey {
            text: None,
            voice: None,
            unsequenced: None,
            end: true,
        }
    }

    /// Whether the client's `seen` proves this frame received.
    fn seen_by(&self, seen: &SeenUpTo) -> bool {
        if self.end {
            return false;
        }
        let by_seq = |s: Option<i64>, upto: i64| s.is_some_and(|s| s >= 0 && s <= upto);
        by_seq(self.text, seen.text)
            || by_seq(self.voice, seen.voice)
            || matches!((self.unsequenced, seen.unsequenced), (Some(r), Some(n)) if r < n)
    }
}

/// Overflowed requests remembered at most (the oldest are forgotten).
const MAX_OVERFLOW_MARKS: usize = 64;

/// Bounds of one buffer.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_frames: usize,
    pub max_bytes: usize,
}

/// A frame's request context and its text bytes, as the outbox's guard carries them.
pub type Guard = Option<(Arc<RequestCtx>, usize)>;

/// One kept frame.
#[derive(Debug)]
pub struct Entry {
    /// Position in the session's frame order (never reused).
    pub no: u64,
    pub request: Arc<str>,
    pub key: FrameKey,
    /// The encoded frame.
    pub text: Arc<str>,
    /// The request's context when the frame was queued for it (dropped by the writer if the
    /// request was cancelled in between, as a live frame would be).
    pub guard: Guard,
    /// Queued to the current socket (or replayed to it) already.
    pub sent: bool,
}

/// A frame did not fit: the request's kept frames were dropped and it is marked overflowed.
#[derive(Debug, PartialEq, Eq)]
pub struct Overflow;

#[derive(Debug, Default)]
struct Inner {
    entries: VecDeque<Entry>,
    bytes: usize,
    /// Requests whose frames did not all fit (their kept frames are gone).
    overflowed: Vec<Arc<str>>,
}

/// What a resume found out about the requests the client listed.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct ResumePlan {
    /// Listed requests whose frames did not all fit: the client must be told.
    pub overflowed: Vec<String>,
    /// Listed requests of which nothing is kept: finished and acknowledged, still running with
    /// everything sent seen, or never received by the server (the caller tells which).
    pub nothing_kept: Vec<String>,
}

#[derive(Debug)]
pub struct ReplayLog {
    limits: Limits,
    next_no: u64,
    inner: Option<Box<Inner>>,
}

impl ReplayLog {
    pub fn new(limits: Limits) -> Self {
        ReplayLog {
            limits,
            next_no: 0,
            inner: None,
        }
    }

    /// The number the next frame will get: every frame kept so far is below it.
    pub fn next_no(&self) -> u64 {
        self.next_no
    }

    pub fn is_empty(&self) -> bool {
        self.inner.is_none()
    }

    pub fn len(&self) -> usize {
        self.inner.as_ref().map_or(0, |i| i.entries.len())
    }

    pub fn bytes(&self) -> usize {
        self.inner.as_ref().map_or(0, |i| i.bytes)
    }

    /// Keeps a frame of `request`. A frame past the bounds drops every kept frame of its
    /// request and marks it overflowed (`Err`); an end frame always fits (there is at most one
    /// per request, and it is what tells the client). Frames of an overflowed request are not
    /// kept any more.
    pub fn record(
        &mut self,
        request: &str,
        key: FrameKey,
        text: Arc<str>,
        guard: Guard,
        sent: bool,
    ) -> Result<u64, Overflow> {
        let inner = self.inner.get_or_insert_with(Box::default);
        if inner.overflowed.iter().any(|r| &**r == request) {
            return Err(Overflow);
        }
        let fits = inner.entries.len() < self.limits.max_frames
            && inner.bytes + text.len() <= self.limits.max_bytes;
        if !fits && !key.end {
            inner.entries.retain(|e| &*e.request != request);
            inner.bytes = inner.entries.iter().map(|e| e.text.len()).sum();
            inner.overflowed.push(request.into());
            // Remembered until the next resume; a client that never answers pings must not
            // grow this without end.
            if inner.overflowed.len() > MAX_OVERFLOW_MARKS {
                inner.overflowed.remove(0);
            }
            return Err(Overflow);
        }
        let no = self.next_no;
        self.next_no += 1;
        inner.bytes += text.len();
        let request = match inner.entries.iter().rev().find(|e| &*e.request == request) {
            Some(e) => e.request.clone(),
            None => request.into(),
        };
        inner.entries.push_back(Entry {
            no,
            request,
            key,
            text,
            guard,
            sent,
        });
        Ok(no)
    }

    /// The client has every frame numbered below `below`: they are dropped.
    pub fn acked(&mut self, below: u64) {
        if let Some(inner) = self.inner.as_mut() {
            while inner.entries.front().is_some_and(|e| e.no < below) {
                let e = inner.entries.pop_front().expect("front checked");
                inner.bytes -= e.text.len();
            }
        }
        self.shrink();
    }

    /// Applies a resuming client's `last_seen`: drops what it has (every frame of a request it
    /// does not list, the seen prefix of the others), marks the rest unsent (to be replayed in
    /// order), and reports the listed requests it must be told about.
    pub fn resume<'a>(
        &mut self,
        last_seen: impl IntoIterator<Item = (&'a str, &'a SeenUpTo)>,
    ) -> ResumePlan {
        let listed: Vec<(&str, &SeenUpTo)> = last_seen.into_iter().collect();
        let mut plan = ResumePlan::default();
        let Some(inner) = self.inner.as_mut() else {
            plan.nothing_kept = listed.iter().map(|(r, _)| r.to_string()).collect();
            return plan;
        };
        // Per listed request, the last frame proven seen.
        let mut last_seen_no: Vec<Option<u64>> = vec![None; listed.len()];
        for e in &inner.entries {
            if let Some(i) = listed.iter().position(|(r, _)| *r == &*e.request)
                && e.key.seen_by(listed[i].1)
            {
                last_seen_no[i] = Some(e.no);
            }
        }
        inner.entries.retain(
            |e| match listed.iter().position(|(r, _)| *r == &*e.request) {
                None => false,
                Some(i) => last_seen_no[i].is_none_or(|n| e.no > n),
            },
        );
        inner.bytes = inner.entries.iter().map(|e| e.text.len()).sum();
        for e in inner.entries.iter_mut() {
            e.sent = false;
        }
        for (r, _) in &listed {
            if let Some(at) = inner.overflowed.iter().position(|o| &**o == *r) {
                inner.overflowed.remove(at);
                plan.overflowed.push(r.to_string());
            } else if !inner.entries.iter().any(|e| &*e.request == *r) {
                plan.nothing_kept.push(r.to_string());
            }
        }
        // Overflow marks of requests the client does not list: it has their end already.
        inner.overflowed.clear();
        self.shrink();
        plan
    }

    /// The next kept frame not yet sent on the current socket, marked sent.
    pub fn next_unsent(&mut self) -> Option<(Arc<str>, Guard)> {
        let inner = self.inner.as_mut()?;
        let e = inner.entries.iter_mut().find(|e| !e.sent)?;
        e.sent = true;
        Some((e.text.clone(), e.guard.clone()))
    }

    /// Whether a request overflowed (and its frames are no longer kept).
    pub fn overflowed(&self, request: &str) -> bool {
        self.inner
            .as_ref()
            .is_some_and(|i| i.overflowed.iter().any(|r| &**r == request))
    }

    /// Frees the buffer once it holds nothing.
    fn shrink(&mut self) {
        if self
            .inner
            .as_ref()
            .is_some_and(|i| i.entries.is_empty() && i.overflowed.is_empty())
        {
            self.inner = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log(frames: usize, bytes: usize) -> ReplayLog {
        ReplayLog::new(Limits {
            max_frames: frames,
            max_bytes: bytes,
        })
    }

    fn voice(seq: i64) -> FrameKey {
        FrameKey {
            text: None,
            voice: Some(seq),
            unsequenced: None,
            end: seq == -1,
        }
    }

    fn unseq(rank: u32) -> FrameKey {
        FrameKey {
            text: None,
            voice: None,
            unsequenced: Some(rank),
            end: false,
        }
    }

    fn rec(l: &mut ReplayLog, r: &str, key: FrameKey, body: &str) -> Result<u64, Overflow> {
        l.record(r, key, body.into(), None, true)
    }

    fn replay(l: &mut ReplayLog) -> Vec<String> {
        std::iter::from_fn(|| l.next_unsent().map(|(t, _)| t.to_string())).collect()
    }

    fn seen(text: i64, voice: i64, unsequenced: Option<u32>) -> SeenUpTo {
        SeenUpTo {
            text,
            voice,
            unsequenced,
        }
    }

    /// A reply with text and voice interleaved, a function call and a transcript.
    fn interleaved(l: &mut ReplayLog) {
        rec(l, "r1", unseq(0), "transcript").unwrap();
        rec(l, "r1", FrameKey::text(0), "t0").unwrap();
        rec(l, "r1", voice(0), "v0").unwrap();
        let both = FrameKey {
            text: Some(1),
            voice: Some(1),
            unsequenced: None,
            end: false,
        };
        rec(l, "r1", both, "t1v1").unwrap();
        rec(l, "r1", unseq(1), "call").unwrap();
        rec(l, "r1", voice(2), "v2").unwrap();
        let end = FrameKey {
            text: Some(-1),
            voice: Some(-1),
            unsequenced: None,
            end: true,
        };
        rec(l, "r1", end, "end").unwrap();
    }

    #[test]
    fn every_cut_replays_exactly_the_frames_after_it() {
        let all = ["transcript", "t0", "v0", "t1v1", "call", "v2", "end"];
        // What a client that saw the first `k` frames reports.
        let reports = [
            seen(-1, -1, Some(0)),
            seen(-1, -1, Some(1)),
            seen(0, -1, Some(1)),
            seen(0, 0, Some(1)),
            seen(1, 1, Some(1)),
            seen(1, 1, Some(2)),
            seen(1, 2, Some(2)),
        ];
        for (k, report) in reports.iter().enumerate() {
            let mut l = log(100, 10_000);
            interleaved(&mut l);
            let plan = l.resume([("r1", report)]);
            assert_eq!(plan, ResumePlan::default(), "cut {k}");
            assert_eq!(replay(&mut l), all[k..].to_vec(), "cut {k}");
            assert!(l.next_unsent().is_none());
        }
    }

    #[test]
    fn without_the_unsequenced_count_a_trailing_call_is_replayed_not_lost() {
        let mut l = log(100, 10_000);
        interleaved(&mut l);
        // Saw up to the call; the count is missing: the call is sent again (never lost).
        l.resume([("r1", &seen(1, 1, None))]);
        assert_eq!(replay(&mut l), ["call", "v2", "end"]);
    }

    #[test]
    fn unlisted_requests_are_dropped_and_order_across_requests_is_kept() {
        let mut l = log(100, 10_000);
        rec(&mut l, "a", FrameKey::text(0), "a0").unwrap();
        rec(&mut l, "b", FrameKey::text(0), "b0").unwrap();
        rec(&mut l, "a", FrameKey::text(1), "a1").unwrap();
        rec(&mut l, "c", FrameKey::text(0), "c0").unwrap();
        rec(&mut l, "b", FrameKey::text(-1), "b-end").unwrap();
        rec(&mut l, "a", FrameKey::text(-1), "a-end").unwrap();
        let none = seen(-1, -1, None);
        let plan = l.resume([("a", &seen(0, -1, None)), ("b", &none), ("x", &none)]);
        assert_eq!(plan.nothing_kept, ["x"]);
        assert_eq!(replay(&mut l), ["b0", "a1", "b-end", "a-end"]);
        // Replayed frames stay until acknowledged; then the buffer is freed.
        assert_eq!(l.len(), 4);
        l.acked(l.next_no());
        assert!(l.is_empty());
    }

    #[test]
    fn acked_frames_go_and_a_second_resume_sends_again_what_was_not_acked() {
        let mut l = log(100, 10_000);
        for i in 0..4 {
            rec(&mut l, "r", FrameKey::text(i), &format!("t{i}")).unwrap();
        }
        l.acked(2);
        assert_eq!(l.len(), 2);
        assert_eq!(l.bytes(), 4);
        l.resume([("r", &seen(1, -1, None))]);
        assert_eq!(replay(&mut l), ["t2", "t3"]);
        rec(&mut l, "r", FrameKey::text(4), "t4").unwrap();
        // Dropped again before anything was acknowledged: everything after seq 2 comes again.
        l.resume([("r", &seen(2, -1, None))]);
        assert_eq!(replay(&mut l), ["t3", "t4"]);
    }

    #[test]
    fn a_frame_past_the_bounds_drops_its_request_and_marks_it() {
        let mut l = log(3, 10_000);
        rec(&mut l, "big", FrameKey::text(0), "b0").unwrap();
        rec(&mut l, "small", FrameKey::text(0), "s0").unwrap();
        rec(&mut l, "big", FrameKey::text(1), "b1").unwrap();
        assert_eq!(rec(&mut l, "big", FrameKey::text(2), "b2"), Err(Overflow));
        assert!(l.overflowed("big"));
        assert_eq!(l.len(), 1);
        // Later frames of it are not kept; its end is not either; others still fit.
        assert_eq!(rec(&mut l, "big", FrameKey::text(3), "b3"), Err(Overflow));
        rec(&mut l, "small", FrameKey::text(1), "s1").unwrap();
        let none = seen(-1, -1, None);
        let plan = l.resume([("big", &none), ("small", &none)]);
        assert_eq!(plan.overflowed, ["big"]);
        assert!(plan.nothing_kept.is_empty());
        assert_eq!(replay(&mut l), ["s0", "s1"]);
        assert!(!l.overflowed("big"));
    }

    #[test]
    fn the_byte_bound_counts_and_an_end_frame_always_fits() {
        let mut l = log(100, 10);
        rec(&mut l, "r", FrameKey::text(0), "12345678").unwrap();
        rec(&mut l, "q", FrameKey::end(), "an end frame over the bound").unwrap();
        assert_eq!(rec(&mut l, "r", FrameKey::text(1), "abc"), Err(Overflow));
        assert_eq!(l.len(), 1);
    }

    #[test]
    fn an_idle_buffer_holds_no_allocation() {
        let mut l = log(10, 100);
        assert!(l.is_empty());
        rec(&mut l, "r", FrameKey::text(0), "x").unwrap();
        l.acked(l.next_no());
        assert!(l.is_empty());
        // Overflow marks of requests the client no longer lists are forgotten on resume.
        let mut l = log(1, 100);
        rec(&mut l, "r", FrameKey::text(0), "x").unwrap();
        rec(&mut l, "r", FrameKey::text(1), "y").unwrap_err();
        assert!(!l.is_empty());
        l.resume(std::iter::empty());
        assert!(l.is_empty());
        assert!(std::mem::size_of::<ReplayLog>() <= 40);
    }
}
