//! The buyers: a deterministic stream of requests, so every strategy of a comparison faces the
//! same demand and a dry run knows exactly what the limits allow. Nothing is stored per request:
//! request `i` is computed from `i`, which keeps a million-request run small in memory.

use std::collections::HashMap;

/// Extra clicks of each repeat clicker (on top of the first).
pub const EXTRA_CLICKS: usize = 2;

/// The shape of the demand.
#[derive(Clone, Debug, PartialEq)]
pub struct Demand {
    /// Distinct buyers (users).
    pub buyers: usize,
    /// Share of buyers who click again (0.0 to 1.0), each [`EXTRA_CLICKS`] more times.
    pub repeat_share: f64,
    /// Number of products the buyers spread over.
    pub products: usize,
    /// Units per request.
    pub quantity: i64,
    /// Seed of the spread (same seed, same demand).
    pub seed: u64,
    /// Prefix of request ids, unique per run (a retry of the same run reuses them).
    pub run_id: String,
}

/// One request of the stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    pub request_id: String,
    pub user: String,
    /// Index into the activity's products.
    pub product: usize,
    pub quantity: i64,
}

/// splitmix64: a small, good mixer for deterministic choices.
pub fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

fn coprime_step(n: usize, seed: u64) -> usize {
    if n <= 2 {
        return 1;
    }
    let gcd = |mut a: usize, mut b: usize| {
        while b != 0 {
            (a, b) = (b, a % b);
        }
        a
    };
    let mut step = (mix(seed) as usize % (n - 1)) + 1;
    while gcd(step, n) != 1 {
        step = step % (n - 1) + 1;
    }
    step
}

impl Demand {
    /// Buyers who click more than once.
    pub fn repeaters(&self) -> usize {
        ((self.buyers as f64) * self.repeat_share.clamp(0.0, 1.0)).round() as usize
    }

    /// Requests in the whole stream.
    pub fn total(&self) -> usize {
        self.buyers + self.repeaters() * EXTRA_CLICKS
    }

    fn product_of(&self, user: usize) -> usize {
        (mix(self.seed ^ (user as u64).wrapping_mul(0x2545_F491_4F6C_DD1D))
            % self.products.max(1) as u64) as usize
    }

    /// Request `i` (0-based) of the stream. Clicks are spread over the run by a fixed
    /// permutation, so repeat clicks arrive while first clicks still do.
    pub fn request(&self, i: usize) -> Request {
        let total = self.total().max(1);
        let idx = (i % total).wrapping_mul(coprime_step(total, self.seed)) % total;
        let user = if idx < self.buyers {
            idx
        } else {
            let extra = idx - self.buyers;
            let repeater = extra / EXTRA_CLICKS;
            // Repeaters are spread over the buyers, not the first few of them.
            repeater.wrapping_mul(coprime_step(self.buyers.max(1), self.seed ^ 7))
                % self.buyers.max(1)
        };
        Request {
            request_id: format!("{}-{i}", self.run_id),
            user: format!("u{user}"),
            product: self.product_of(user),
            quantity: self.quantity,
        }
    }

    /// Units each product's buyers are allowed to take at most: per user, the smaller of what
    /// they ask for and the product's limit.
    pub fn allowed_units(&self, limits: &[i64]) -> Vec<i64> {
        let mut asked: HashMap<(usize, String), i64> = HashMap::new();
        for i in 0..self.total() {
            let r = self.request(i);
            *asked.entry((r.product, r.user)).or_default() += r.quantity;
        }
        let mut allowed = vec![0i64; self.products.max(1)];
        for ((product, _), units) in asked {
            let limit = limits.get(product).copied().unwrap_or(i64::MAX);
            allowed[product] += units.min(limit);
        }
        allowed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    fn demand() -> Demand {
        Demand {
            buyers: 1000,
            repeat_share: 0.2,
            products: 3,
            quantity: 1,
            seed: 42,
            run_id: "t".into(),
        }
    }

    #[test]
    fn the_stream_is_a_permutation_of_every_click() {
        let d = demand();
        assert_eq!(d.total(), 1000 + 200 * EXTRA_CLICKS);
        let ids: HashSet<String> = (0..d.total()).map(|i| d.request(i).request_id).collect();
        assert_eq!(ids.len(), d.total());
        let mut clicks: HashMap<String, usize> = HashMap::new();
        for i in 0..d.total() {
            *clicks.entry(d.request(i).user).or_default() += 1;
        }
        assert_eq!(clicks.len(), 1000, "every buyer clicks");
        assert_eq!(
            clicks.values().filter(|&&c| c == 1 + EXTRA_CLICKS).count(),
            200
        );
    }

    #[test]
    fn a_user_always_asks_for_the_same_product() {
        let d = demand();
        let mut seen: HashMap<String, usize> = HashMap::new();
        for i in 0..d.total() {
            let r = d.request(i);
            assert_eq!(*seen.entry(r.user.clone()).or_insert(r.product), r.product);
        }
    }

    #[test]
    fn allowed_units_respect_limits() {
        let d = demand();
        let one = d.allowed_units(&[1, 1, 1]);
        assert_eq!(one.iter().sum::<i64>(), 1000, "limit 1: one unit per buyer");
        let two = d.allowed_units(&[2, 2, 2]);
        assert_eq!(
            two.iter().sum::<i64>(),
            1000 + 200,
            "limit 2: repeaters take a second unit"
        );
    }

    #[test]
    fn same_seed_same_demand() {
        assert_eq!(demand().request(17), demand().request(17));
    }
}
