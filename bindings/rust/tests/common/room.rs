//! The relay's group room (docs/PROTOCOL.md 15.9) in memory, for the roll
//! call: each connection gets the next slot from 1; a join is announced to
//! those present (`peer_joined`) and the newcomer told its slot and theirs
//! (`joined`); a departure is announced (`peer_left`); every message goes,
//! in order, to every other member present with its sender's slot.  As the
//! vector generator's room (Sources/VectorGen/RollCallVectors.swift) does,
//! each message is handed to the others as soon as it is taken, and what a
//! member sends while alone goes nowhere.
//!
//! A room may also lie: two members it hides from each other see neither
//! the other's join nor its messages (someone showing different
//! participants to different devices).

use itsme::{Error, RollCall};
use std::collections::HashSet;

/// One member: its roll call and, while connected, its slot.
pub struct Seat {
    pub call: RollCall,
    pub slot: Option<u16>,
}

#[derive(Default)]
pub struct GroupRoom {
    pub seats: Vec<Seat>,
    next_slot: u16,
    /// Pairs of seats hidden from each other, the lower seat first.
    hidden: HashSet<(usize, usize)>,
    /// Every message delivered to someone, with its sender's slot, in order.
    pub sent: Vec<(u16, Vec<u8>)>,
}

impl GroupRoom {
    /// Takes `call` in and connects it at `now`, asserting that no message
    /// is refused: its seat.
    pub fn enter(&mut self, call: RollCall, now: i64) -> usize {
        self.seats.push(Seat { call, slot: None });
        let seat = self.seats.len() - 1;
        let errors = self.connect(seat, now);
        assert!(errors.is_empty(), "seat {seat} entering: {errors:?}");
        seat
    }

    /// Connects seat `seat` (again) under a new slot, and delivers until
    /// quiet: the errors receivers raised.
    pub fn connect(&mut self, seat: usize, now: i64) -> Vec<(usize, Error)> {
        assert!(self.seats[seat].slot.is_none(), "seat {seat} is connected already");
        self.next_slot += 1;
        let slot = self.next_slot;
        let mut peers = Vec::new();
        for other in self.visible_to(seat) {
            let other_seat = &mut self.seats[other];
            other_seat.call.peer_joined(slot, now).unwrap();
            peers.push(other_seat.slot.unwrap());
        }
        self.seats[seat].call.joined(slot, &peers, now).unwrap();
        self.seats[seat].slot = Some(slot);
        self.pump(now)
    }

    /// Seat `seat`'s connection ends: the others see its slot leave.
    pub fn disconnect(&mut self, seat: usize, now: i64) -> Vec<(usize, Error)> {
        let slot = self.seats[seat].slot.take().expect("a connected seat");
        for other in self.visible_to(seat) {
            self.seats[other].call.peer_left(slot, now).unwrap();
        }
        self.pump(now)
    }

    /// From now on seats `a` and `b` see neither each other's joins nor each
    /// other's messages (to be set before either joins).
    pub fn hide(&mut self, a: usize, b: usize) {
        self.hidden.insert((a.min(b), a.max(b)));
    }

    /// The connected seats that seat `seat` sees, itself apart.
    fn visible_to(&self, seat: usize) -> Vec<usize> {
        (0..self.seats.len())
            .filter(|&other| {
                other != seat
                    && self.seats[other].slot.is_some()
                    && !self.hidden.contains(&(seat.min(other), seat.max(other)))
            })
            .collect()
    }

    /// Delivers until quiet: the errors receivers raised.
    pub fn pump(&mut self, now: i64) -> Vec<(usize, Error)> {
        self.pump_through(now, |_, message| message)
    }

    /// [`GroupRoom::pump`], each message passing through `tamper` (given
    /// its sender's seat) on its way.
    pub fn pump_through(&mut self, now: i64, mut tamper: impl FnMut(usize, Vec<u8>) -> Vec<u8>) -> Vec<(usize, Error)> {
        let mut errors = Vec::new();
        let mut moved = true;
        while moved {
            moved = false;
            for seat in 0..self.seats.len() {
                let Some(slot) = self.seats[seat].slot else { continue };
                loop {
                    let message = self.seats[seat].call.next_outgoing().unwrap();
                    if message.is_empty() {
                        break;
                    }
                    moved = true;
                    let others = self.visible_to(seat);
                    if others.is_empty() {
                        continue; // alone: it goes nowhere
                    }
                    let message = tamper(seat, message);
                    for other in others {
                        if let Err(error) = self.seats[other].call.receive(&message, slot, now) {
                            errors.push((other, error));
                        }
                    }
                    self.sent.push((slot, message));
                }
            }
        }
        errors
    }

    /// Every connected member's tick at `now`, then delivery until quiet.
    pub fn tick(&mut self, now: i64) -> Vec<(usize, Error)> {
        for seat in &mut self.seats {
            if seat.slot.is_some() {
                seat.call.tick(now).unwrap();
            }
        }
        self.pump(now)
    }

    /// Ticks once a second from `from` to `to`, both included, asserting
    /// that no message is refused.
    pub fn run(&mut self, from: i64, to: i64) {
        for now in from..=to {
            let errors = self.tick(now);
            assert!(errors.is_empty(), "at {now}: {errors:?}");
        }
    }

    pub fn call(&mut self, seat: usize) -> &mut RollCall {
        &mut self.seats[seat].call
    }
}
