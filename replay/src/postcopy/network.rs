//! Page fetch timing over a shared migration link and a source that
//! serves a bounded number of requests at once (issue #41, item 4).
//!
//! A demand fetch goes through four stages, each a resource or a delay:
//!
//! 1. the destination's software (fault path, daemon request; page
//!    install and wake-up afterwards): a delay, fetches overlap freely;
//! 2. the request's bytes on the destination → source direction of the
//!    link (FIFO, serialised at the link's bandwidth), then half the RTT;
//! 3. the source: `source_workers` servers, each busy `source_service_ns`
//!    per page; requests wait in FIFO order, ahead of background pages;
//! 4. the reply (page + protocol header + per-frame framing) on the
//!    source → destination direction (FIFO, serialised, shared with the
//!    background stream), then the other half of the RTT.
//!
//! On an idle link and source a fetch takes the sum of the four; when
//! many tasks fault at once they queue on the link and the source instead
//! of overlapping perfectly. Demand fetches beyond `max_inflight` wait at
//! the destination, in FIFO order, before stage 1.
//!
//! The caller owns the clock: [`Link::demand`] says when a request reaches
//! the source, [`Link::at_source`] when its service ends, and
//! [`Link::served`] when the page arrives at the destination. Each is
//! called at the time it names, so every FIFO is served in time order.

use std::collections::VecDeque;

/// What a fetch is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Stream {
    /// A page a task faulted on.
    Demand,
    /// A page the background stream pushes.
    Background,
}

/// The migration link and the source's page server, as the destination
/// sees them.
#[derive(Clone, Debug)]
pub struct Link {
    dest_ns: i64,
    half_rtt_up_ns: i64,
    half_rtt_down_ns: i64,
    request_wire_ns: i64,
    reply_wire_ns: i64,
    service_ns: i64,
    up_free_at: i64,
    down_free_at: i64,
    /// Each source worker's page (and stream) while busy.
    workers: Vec<Option<(u64, Stream)>>,
    source_demand_q: VecDeque<(u64, i64)>,
    source_background_q: VecDeque<(u64, i64)>,
    inflight: usize,
    max_inflight: usize,
    waiting: VecDeque<(u64, i64)>,
    page_bytes: u64,
    reply_wire_bytes: u64,
    request_wire_bytes: u64,
    /// Bytes fetched on demand (pages only).
    pub demand_bytes: u64,
    /// Bytes fetched by the background stream (pages only).
    pub background_bytes: u64,
    /// Bytes on the wire, both directions, framing included.
    pub wire_bytes: u64,
    /// Time the source → destination direction spent sending, ns.
    pub down_busy_ns: i64,
    /// Time the source's workers spent serving, summed over workers, ns.
    pub source_busy_ns: i64,
    /// Demand fetches completed.
    pub demand_fetches: u64,
    /// Sum over demand fetches of request → arrival, ns.
    pub demand_fetch_ns: i64,
    /// Of that, time spent waiting (destination limit, link, source), ns.
    pub demand_wait_ns: i64,
    /// Issue time of each demand fetch in flight, by page.
    issued: std::collections::BTreeMap<u64, i64>,
}

/// Bytes on the wire for a message of `payload` bytes: the payload plus
/// `frame` bytes of framing for each `mtu - 40` bytes of TCP payload (40:
/// the IPv4 and TCP headers, which `frame` counts).
pub fn wire_bytes(payload: u64, mtu: u64, frame: u64) -> u64 {
    let per_frame = mtu.saturating_sub(40).max(1);
    payload + payload.div_ceil(per_frame).max(1) * frame
}

impl Link {
    /// A link from the scenario parameters.
    pub fn new(p: &super::PostcopyParams) -> Self {
        let ns = |bytes: u64| (bytes as f64 / p.link_bytes_per_s * 1e9).round() as i64;
        let request_wire_bytes = wire_bytes(p.msg_header_bytes, p.mtu_bytes, p.frame_bytes);
        let reply_wire_bytes = wire_bytes(
            p.page_bytes + p.msg_header_bytes,
            p.mtu_bytes,
            p.frame_bytes,
        );
        Link {
            dest_ns: p.fetch_overhead_ns,
            half_rtt_up_ns: p.rtt_ns / 2,
            half_rtt_down_ns: p.rtt_ns - p.rtt_ns / 2,
            request_wire_ns: ns(request_wire_bytes),
            reply_wire_ns: ns(reply_wire_bytes),
            service_ns: p.source_service_ns,
            up_free_at: 0,
            down_free_at: 0,
            workers: vec![None; p.source_workers.max(1)],
            source_demand_q: VecDeque::new(),
            source_background_q: VecDeque::new(),
            inflight: 0,
            max_inflight: p.max_inflight.max(1),
            waiting: VecDeque::new(),
            page_bytes: p.page_bytes,
            reply_wire_bytes,
            request_wire_bytes,
            demand_bytes: 0,
            background_bytes: 0,
            wire_bytes: 0,
            down_busy_ns: 0,
            source_busy_ns: 0,
            demand_fetches: 0,
            demand_fetch_ns: 0,
            demand_wait_ns: 0,
            issued: Default::default(),
        }
    }

    /// Send the request for `page` now: when it reaches the source.
    fn send(&mut self, now: i64) -> i64 {
        let begin = (now + self.dest_ns).max(self.up_free_at);
        self.up_free_at = begin + self.request_wire_ns;
        self.wire_bytes += self.request_wire_bytes;
        self.inflight += 1;
        self.up_free_at + self.half_rtt_up_ns
    }

    /// A task faulted on `page` now: Some(time the request reaches the
    /// source), or None if it waits for a destination slot (it is sent
    /// by [`Link::arrived`] later).
    pub fn demand(&mut self, now: i64, page: u64) -> Option<i64> {
        self.issued.insert(page, now);
        if self.inflight < self.max_inflight {
            Some(self.send(now))
        } else {
            self.waiting.push_back((page, now));
            None
        }
    }

    /// A page reaches the source (a request, or the background stream
    /// offering its next page) now: Some(time its service ends) if a
    /// worker takes it at once, None if it queues.
    pub fn at_source(&mut self, now: i64, page: u64, stream: Stream) -> Option<(usize, i64)> {
        if let Some(w) = self.workers.iter().position(Option::is_none) {
            self.workers[w] = Some((page, stream));
            self.source_busy_ns += self.service_ns;
            return Some((w, now + self.service_ns));
        }
        match stream {
            Stream::Demand => self.source_demand_q.push_back((page, now)),
            Stream::Background => self.source_background_q.push_back((page, now)),
        }
        None
    }

    /// Worker `w` finished serving its page now: the page, its stream,
    /// when it arrives at the destination, and the next page the worker
    /// takes from the queue (demand first) with its service end.
    pub fn served(&mut self, now: i64, w: usize) -> Served {
        let (page, stream) = self.workers[w].take().expect("a busy worker");
        let begin = now.max(self.down_free_at);
        self.down_free_at = begin + self.reply_wire_ns;
        self.down_busy_ns += self.reply_wire_ns;
        self.wire_bytes += self.reply_wire_bytes;
        let arrival = self.down_free_at + self.half_rtt_down_ns;
        let next = self
            .source_demand_q
            .pop_front()
            .map(|(pg, _)| (pg, Stream::Demand))
            .or_else(|| {
                self.source_background_q
                    .pop_front()
                    .map(|(pg, _)| (pg, Stream::Background))
            })
            .map(|(pg, s)| {
                self.workers[w] = Some((pg, s));
                self.source_busy_ns += self.service_ns;
                (pg, s, now + self.service_ns)
            });
        Served {
            page,
            stream,
            arrival,
            next,
        }
    }

    /// A page arrived now: its bytes are counted, and a demand arrival
    /// frees a destination slot. Returns the next waiting demand page and
    /// when its request reaches the source.
    pub fn arrived(&mut self, now: i64, page: u64, stream: Stream) -> Option<(u64, i64)> {
        match stream {
            Stream::Background => {
                self.background_bytes += self.page_bytes;
                None
            }
            Stream::Demand => {
                self.demand_bytes += self.page_bytes;
                self.demand_fetches += 1;
                if let Some(t0) = self.issued.remove(&page) {
                    self.demand_fetch_ns += now - t0;
                    self.demand_wait_ns += (now - t0 - self.idle_fetch_ns()).max(0);
                }
                self.inflight = self.inflight.saturating_sub(1);
                let (next, _) = self.waiting.pop_front()?;
                Some((next, self.send(now)))
            }
        }
    }

    /// An idle fetch's duration (no queueing anywhere), ns.
    pub fn idle_fetch_ns(&self) -> i64 {
        self.dest_ns
            + self.request_wire_ns
            + self.half_rtt_up_ns
            + self.service_ns
            + self.reply_wire_ns
            + self.half_rtt_down_ns
    }

    /// Time one reply occupies the source → destination direction, ns.
    pub fn reply_wire_ns(&self) -> i64 {
        self.reply_wire_ns
    }
}

/// What [`Link::served`] returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Served {
    /// The page served.
    pub page: u64,
    /// Its stream.
    pub stream: Stream,
    /// When it arrives at the destination.
    pub arrival: i64,
    /// The worker's next page, its stream and its service end.
    pub next: Option<(u64, Stream, i64)>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::postcopy::PostcopyParams;

    #[test]
    fn the_paper_link_fetches_an_idle_page_in_about_100_us() {
        let p = PostcopyParams::default();
        let l = Link::new(&p);
        // 8-byte offset in one frame; 4096 + 8 bytes in three 1460-byte frames
        assert_eq!(wire_bytes(8, 1500, 78), 86);
        assert_eq!(wire_bytes(4104, 1500, 78), 4104 + 3 * 78);
        assert!(
            (99_500..=100_500).contains(&l.idle_fetch_ns()),
            "{}",
            l.idle_fetch_ns()
        );
    }

    #[test]
    fn one_source_worker_serialises_simultaneous_requests() {
        let p = PostcopyParams {
            source_workers: 1,
            ..Default::default()
        };
        let mut l = Link::new(&p);
        let a = l.demand(0, 1).unwrap();
        let b = l.demand(0, 2).unwrap();
        // the second request is behind the first on the wire only
        assert_eq!(b - a, l.request_wire_ns);
        let (w, end_a) = l.at_source(a, 1, Stream::Demand).unwrap();
        assert!(l.at_source(b, 2, Stream::Demand).is_none());
        let s = l.served(end_a, w);
        let (pg, _, end_b) = s.next.unwrap();
        assert_eq!((pg, end_b), (2, end_a + p.source_service_ns));
    }
}
