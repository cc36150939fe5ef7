//! Page fetch timing: a fixed software overhead and one RTT per fetch,
//! overlapping freely, then the page's bytes serialised on the link.
//! Demand fetches beyond `max_inflight` wait in FIFO order.

use std::collections::VecDeque;

/// The migration link as the destination sees it.
#[derive(Clone, Debug)]
pub struct Link {
    overhead_rtt_ns: i64,
    transfer_ns: i64,
    link_free_at: i64,
    inflight: usize,
    max_inflight: usize,
    waiting: VecDeque<u64>,
    /// Bytes fetched on demand.
    pub demand_bytes: u64,
    /// Bytes fetched by the background stream.
    pub background_bytes: u64,
    page_bytes: u64,
}

impl Link {
    /// A link from the scenario parameters.
    pub fn new(p: &super::PostcopyParams) -> Self {
        Link {
            overhead_rtt_ns: p.fetch_overhead_ns + p.rtt_ns,
            transfer_ns: (p.page_bytes as f64 / p.link_bytes_per_s * 1e9).round() as i64,
            link_free_at: 0,
            inflight: 0,
            max_inflight: p.max_inflight.max(1),
            waiting: VecDeque::new(),
            demand_bytes: 0,
            background_bytes: 0,
            page_bytes: p.page_bytes,
        }
    }

    /// Start a fetch now; returns its arrival time. The link serialises
    /// transfers, so arrival ≥ the previous transfer's end.
    fn start(&mut self, now: i64, background: bool) -> i64 {
        let ready_to_send = now + self.overhead_rtt_ns;
        let begin = ready_to_send.max(self.link_free_at);
        self.link_free_at = begin + self.transfer_ns;
        if background {
            self.background_bytes += self.page_bytes;
        } else {
            self.demand_bytes += self.page_bytes;
            self.inflight += 1;
        }
        self.link_free_at
    }

    /// Request `page` on demand: Some(arrival) if it starts now, None if queued.
    pub fn demand(&mut self, now: i64, page: u64) -> Option<i64> {
        if self.inflight < self.max_inflight {
            Some(self.start(now, false))
        } else {
            self.waiting.push_back(page);
            None
        }
    }

    /// A demand fetch finished: start the next queued one, if any.
    pub fn demand_done(&mut self, now: i64) -> Option<(u64, i64)> {
        self.inflight = self.inflight.saturating_sub(1);
        let page = self.waiting.pop_front()?;
        Some((page, self.start(now, false)))
    }

    /// Start a background fetch now; returns its arrival time.
    pub fn background(&mut self, now: i64) -> i64 {
        self.start(now, true)
    }

    /// An idle fetch's duration, ns.
    pub fn idle_fetch_ns(&self) -> i64 {
        self.overhead_rtt_ns + self.transfer_ns
    }
}
