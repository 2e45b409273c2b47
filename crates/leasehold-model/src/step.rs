//! The model's steps: which actions each state allows and what each does. Holders compute
//! their local deadline with the library's `deadline_after`; the store and the resource
//! decide in `serve.rs`. A [`Broken`] rule replaces one of them.

use leasehold::rules;
use stateright::{Model, Property};

use crate::state::{Action, Ans, ClaimState, Client, Data, Ghost, Hold, Phase, Req, ResMsg, State};
use crate::{Broken, Protocol};

impl Protocol {
    /// Local ticks left before the deadline of a request sent `age` local ticks ago, as the
    /// library computes it: `t_sent + deadline_after(ttl, drift, margin)`, rounded up to the
    /// first local tick at or after it (the holder looks at its clock on ticks, and is lost
    /// from that instant on); 0 once passed.
    pub fn left(&self, age: u8) -> u8 {
        let c = &self.config;
        let d = rules::deadline_after(c.ttl(), c.drift(), c.margin());
        let ticks = u8::try_from(d.as_nanos().div_ceil(1_000_000_000)).unwrap_or(u8::MAX);
        ticks.saturating_sub(age)
    }

    /// Ticks a client's clock needs between two lost ticks.
    fn drift_period(&self) -> u8 {
        match self.config.broken {
            Broken::DriftBeyondBound => 1,
            _ => self.config.drift_every,
        }
    }

    fn new_client(&self) -> Client {
        Client {
            phase: Phase::Idle,
            since_skip: self.drift_period().saturating_sub(1),
            acquired: 0,
            sent_store: false,
            sent_res: false,
            to_res: None,
        }
    }

    /// Drops what can no longer matter, so that states that differ only there are one: the
    /// store frame's dead values (`canon.rs`), the replica once no failover is left, the
    /// drift budget of a client that times nothing, the age of an unanswered renewal where
    /// no rule reads it, and the per-tick send limits outside a liveness run (they only keep
    /// its paths acyclic).
    fn normalize(&self, s: &mut State) {
        let period = self.drift_period();
        self.canon_store(s);
        if s.failovers >= self.config.failovers {
            s.replica = Data::default();
            // The last grant's age matters to a failover's assumption, and to forgetting.
            if self.config.forget_after == 0 {
                s.ghost.last_grant_clock = 0;
            }
        }
        let liveness = self.config.liveness.is_some();
        for c in &mut s.clients {
            match &mut c.phase {
                Phase::Holding(h) => {
                    if self.config.broken != Broken::ExtendOnTimeout {
                        h.renewing = h.renewing.map(|_| 0);
                    }
                }
                _ => c.since_skip = period.saturating_sub(1),
            }
            if !liveness {
                c.sent_store = false;
                c.sent_res = false;
            }
        }
    }

    /// In a liveness run time waits while the waiter can act, and, once the holder has
    /// stopped, while a message is in flight: the waiter never pauses and the network
    /// delivers (the fairness the `eventually` property needs).
    fn time_waits(&self, s: &State, actions: &[Action]) -> bool {
        let Some(stop_at) = self.config.liveness else { return false };
        let waiter_acts = actions.iter().any(|a| client_of(a) == Some(1));
        let in_flight = s.clients.iter().any(|c| c.to_res.is_some());
        waiter_acts || (s.now >= stop_at && in_flight)
    }

    fn client_actions(&self, s: &State, i: u8, c: &Client, out: &mut Vec<Action>) {
        let cfg = &self.config;
        let lossy = cfg.lossy;
        let can_send = !c.sent_store;
        let can_res = c.to_res.is_none() && !c.sent_res;
        let acquire = |owner| can_send && Self::servable(s, Req::Acquire { owner });
        let may_acquire = match c.phase {
            Phase::Idle => c.acquired < cfg.acquisitions && acquire(0),
            Phase::Waiting { owner } => acquire(owner),
            _ => false,
        };
        if may_acquire {
            out.push(Action::Acquire(i));
            if lossy {
                out.push(Action::AcquireUnanswered(i));
            }
        }
        match c.phase {
            Phase::Cleanup { .. } if can_send => out.push(Action::Cleanup(i)),
            Phase::Holding(h) if h.left == Some(0) => out.push(Action::Lost(i)),
            Phase::Holding(h) => {
                match h.renewing {
                    Some(_) => out.push(Action::Timeout(i)),
                    None if can_send => {
                        out.push(Action::Renew(i));
                        if lossy {
                            out.push(Action::RenewUnanswered(i));
                            out.push(Action::RenewLost(i));
                        }
                    }
                    None => {}
                }
                if can_send {
                    out.push(Action::Release(i));
                }
                match h.claim {
                    ClaimState::No if can_res => out.push(Action::Claim(i)),
                    ClaimState::Sent if c.to_res.is_none() => out.push(Action::ClaimTimeout(i)),
                    ClaimState::Ok if can_res && h.effects > 0 => out.push(Action::Effect(i)),
                    _ => {}
                }
            }
            _ => {}
        }
        if let Some(m) = c.to_res {
            out.push(Action::Apply(i));
            if lossy {
                out.push(Action::LoseRes(i));
                if m.claim {
                    out.push(Action::ApplyUnanswered(i));
                }
            }
        }
    }

    /// A holder sends a claim or an effect: the moment it acts on its authority.
    fn act(s: &mut State, h: &Hold) {
        let excused = s.ghost.failover_at.is_some_and(|n| h.seq < n);
        if s.ghost.latest != Some(h.owner) && !excused {
            s.ghost.acted_superseded = true;
        }
        if h.answered == 0 {
            s.ghost.acted_unanswered = true;
        }
    }

    /// A new hold after a grant, as the library starts it.
    fn hold(&self, owner: u8, fence: i16, seq: u8) -> Hold {
        let cfg = &self.config;
        let left = self.left(0);
        Hold {
            owner,
            fence,
            seq,
            left: (cfg.broken != Broken::NoLocalDeadline).then_some(left),
            answered: left,
            renewing: None,
            claim: if cfg.broken == Broken::NoClaim { ClaimState::Ok } else { ClaimState::No },
            effects: cfg.effects,
        }
    }

    fn client_step(&self, s: &mut State, a: Action) {
        let Some(i) = client_of(&a) else { return };
        let i = usize::from(i);
        let c = s.clients[i];
        match (a, c.phase) {
            (
                Action::Acquire(_) | Action::AcquireUnanswered(_),
                Phase::Idle | Phase::Waiting { .. },
            ) => {
                let owner = match c.phase {
                    Phase::Waiting { owner } => owner,
                    _ => i as u8 * 8 + c.acquired,
                };
                let c = &mut s.clients[i];
                if c.phase == Phase::Idle {
                    c.acquired += 1;
                }
                c.sent_store = true;
                let ans = self.serve(s, Req::Acquire { owner });
                s.clients[i].phase = match (a, ans) {
                    (Action::AcquireUnanswered(_), _) => Phase::Cleanup { owner },
                    (_, Ans::Granted(fence, seq)) => {
                        if i == 1 && self.config.liveness.is_some() {
                            s.ghost.waiter_held = true;
                        }
                        Phase::Holding(self.hold(owner, fence, seq))
                    }
                    _ => Phase::Waiting { owner },
                };
            }
            (Action::Cleanup(_), Phase::Cleanup { owner }) => {
                s.clients[i].phase = Phase::Idle;
                s.clients[i].sent_store = true;
                self.serve(s, Req::Release { owner });
            }
            (_, Phase::Holding(h)) => self.holder_step(s, i, a, h),
            _ => {}
        }
    }

    fn holder_step(&self, s: &mut State, i: usize, a: Action, mut h: Hold) {
        let broken = self.config.broken;
        let owner = h.owner;
        match a {
            Action::Renew(_) | Action::RenewUnanswered(_) | Action::RenewLost(_) => {
                s.clients[i].sent_store = true;
                let ans = match a {
                    Action::RenewLost(_) => None,
                    _ => Some(self.serve(s, Req::Renew { owner })),
                };
                s.clients[i].phase = match (a, ans) {
                    (Action::Renew(_), Some(Ans::Renewed)) => {
                        let nd = self.left(0);
                        h.left = h.left.map(|d| d.max(nd));
                        h.answered = h.answered.max(nd);
                        Phase::Holding(h)
                    }
                    // Not the owner: lost; the library releases it in the background.
                    (Action::Renew(_), _) => Phase::Cleanup { owner },
                    _ => Phase::Holding(Hold { renewing: Some(0), ..h }),
                };
            }
            Action::Release(_) => {
                s.clients[i].phase = Phase::Idle;
                s.clients[i].sent_store = true;
                self.serve(s, Req::Release { owner });
            }
            // The library releases a lost lease in the background, owner-checked.
            Action::Lost(_) => s.clients[i].phase = Phase::Cleanup { owner },
            Action::Timeout(_) => {
                let age = h.renewing.take().unwrap_or(0);
                if broken == Broken::ExtendOnTimeout {
                    let nd = self.left(age);
                    h.left = h.left.map(|d| d.max(nd));
                }
                s.clients[i].phase = Phase::Holding(h);
            }
            Action::Claim(_) | Action::Effect(_) => {
                let claim = matches!(a, Action::Claim(_));
                if claim {
                    h.claim = ClaimState::Sent;
                } else {
                    h.effects -= 1;
                }
                let c = &mut s.clients[i];
                c.to_res = Some(ResMsg { claim, owner, fence: h.fence, seq: h.seq });
                c.sent_res = true;
                c.phase = Phase::Holding(h);
                Self::act(s, &h);
            }
            Action::ClaimTimeout(_) => {
                h.claim = ClaimState::No;
                s.clients[i].phase = Phase::Holding(h);
            }
            _ => {}
        }
    }

    /// The resource handles client `i`'s message; a claim's answer reaches the holder unless
    /// `answered` is false.
    fn deliver(s: &mut State, i: usize, answered: bool) {
        let claim = s.clients[i].to_res.is_some_and(|m| m.claim);
        let ok = Self::apply(s, i);
        if claim
            && answered
            && let Phase::Holding(h) = &mut s.clients[i].phase
            && h.claim == ClaimState::Sent
        {
            h.claim = if ok { ClaimState::Ok } else { ClaimState::Refused };
        }
    }
}

/// The client an action belongs to, if any.
pub(crate) fn client_of(a: &Action) -> Option<u8> {
    match *a {
        Action::Acquire(i)
        | Action::AcquireUnanswered(i)
        | Action::Renew(i)
        | Action::RenewUnanswered(i)
        | Action::RenewLost(i)
        | Action::Timeout(i)
        | Action::Release(i)
        | Action::Cleanup(i)
        | Action::Lost(i)
        | Action::Claim(i)
        | Action::Effect(i)
        | Action::Apply(i)
        | Action::ApplyUnanswered(i)
        | Action::LoseRes(i)
        | Action::ClaimTimeout(i) => Some(i),
        Action::Tick { .. }
        | Action::Replicate
        | Action::Failover { .. }
        | Action::Forget
        | Action::StepBack { .. } => None,
    }
}

impl Protocol {
    /// The counter of a key with no fence issued (or forgotten): far below the clock (0 as a
    /// plain counter).
    fn no_counter(&self) -> i16 {
        if self.config.broken == Broken::PlainCounter { 0 } else { i16::MIN / 2 }
    }
}

impl Model for Protocol {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        let none = self.no_counter();
        let data = Data { grant: None, counter: none };
        let mut s = State {
            now: 0,
            store: data,
            replica: data,
            granted_now: false,
            failovers: 0,
            back: 0,
            clients: (0..self.config.clients).map(|_| self.new_client()).collect(),
            installed: None,
            ghost: Ghost { max_fence: none, ..Ghost::default() },
        };
        self.normalize(&mut s);
        vec![s]
    }

    fn actions(&self, s: &State, out: &mut Vec<Action>) {
        let cfg = &self.config;
        for (i, c) in s.clients.iter().enumerate() {
            self.client_actions(s, i as u8, c, out);
        }
        if s.failovers < cfg.failovers {
            if s.replica != s.store {
                out.push(Action::Replicate);
            }
            for skew in 0..=cfg.max_skew {
                // CLOCK_ASSUMPTION: the new server's clock reads later than the last grant.
                let within = !s.ghost.issued || -(skew as i8) > s.ghost.last_grant_clock;
                if within || cfg.broken == Broken::ClockBeyondAssumption {
                    out.push(Action::Failover { skew });
                }
            }
        }
        if cfg.forget_after > 0 && s.store.counter != self.no_counter() && s.live_grant().is_none()
        {
            // The horizon: ticks of the store's clock since the key's last grant.
            let h =
                if cfg.broken == Broken::ForgetTooSoon { cfg.clock_back } else { cfg.forget_after };
            if !s.ghost.issued || s.ghost.last_grant_clock <= -(h as i8) {
                out.push(Action::Forget);
            }
        }
        for by in 1..=cfg.clock_back.saturating_sub(s.back) {
            out.push(Action::StepBack { by });
        }
        let time_left = cfg.liveness.is_none() || s.now < cfg.horizon;
        if time_left && !self.time_waits(s, out) {
            let period = self.drift_period();
            let eligible: Vec<usize> = (0..s.clients.len())
                .filter(|&i| {
                    let c = &s.clients[i];
                    period > 0 && c.since_skip + 1 >= period && matches!(c.phase, Phase::Holding(_))
                })
                .collect();
            for subset in 0..(1u16 << eligible.len()) {
                let slow = eligible
                    .iter()
                    .enumerate()
                    .filter(|(b, _)| subset & (1 << b) != 0)
                    .fold(0u8, |m, (_, &i)| m | (1 << i));
                out.push(Action::Tick { slow });
            }
        }
    }

    fn next_state(&self, last: &State, a: Action) -> Option<State> {
        let mut s = last.clone();
        let period = self.drift_period();
        match a {
            Action::Tick { slow } => {
                if self.config.liveness.is_some() {
                    s.now += 1;
                }
                s.granted_now = false;
                self.shift_store(&mut s, -1);
                for (i, c) in s.clients.iter_mut().enumerate() {
                    c.sent_store = false;
                    c.sent_res = false;
                    if slow & (1 << i) != 0 {
                        c.since_skip = 0;
                        continue;
                    }
                    c.since_skip = (c.since_skip + 1).min(period.saturating_sub(1));
                    let cap = self.left(0);
                    if let Phase::Holding(h) = &mut c.phase {
                        h.left = h.left.map(|l| l.saturating_sub(1));
                        h.answered = h.answered.saturating_sub(1);
                        h.renewing = h.renewing.map(|a| (a + 1).min(cap));
                    }
                }
                if let Some(stop_at) = self.config.liveness
                    && s.now >= stop_at
                {
                    s.clients[0].phase = Phase::Stopped;
                }
            }
            Action::Apply(i) => Self::deliver(&mut s, usize::from(i), true),
            Action::ApplyUnanswered(i) => Self::deliver(&mut s, usize::from(i), false),
            Action::LoseRes(i) => s.clients[usize::from(i)].to_res = None,
            Action::Replicate => s.replica = s.store,
            Action::Failover { skew } => {
                s.store = s.replica;
                self.shift_store(&mut s, skew as i8);
                s.failovers += 1;
                s.granted_now = false;
                s.ghost.failover_at = Some(s.ghost.grants);
            }
            Action::Forget => {
                s.store.counter = self.no_counter();
                s.store.grant = None;
            }
            Action::StepBack { by } => {
                self.shift_store(&mut s, by as i8);
                s.back += by;
            }
            _ => self.client_step(&mut s, a),
        }
        self.normalize(&mut s);
        Some(s)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        crate::props::properties(&self.config)
    }

    fn within_boundary(&self, s: &State) -> bool {
        self.config.liveness.is_none() || s.now <= self.config.horizon
    }
}
