//! xorshift64*: the small, seeded, reproducible generator every stable fuzz and kill harness
//! shares (`#[path]`-included by store/tests/fuzz_decoders.rs, src/agent/closure_fuzz.rs and
//! tests/cli/crash_campaign.rs), so a printed seed replays the same inputs everywhere.

/// The generator state (never 0).
pub struct Rng(pub u64);

impl Rng {
    /// The next 64 random bits.
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A number in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}
