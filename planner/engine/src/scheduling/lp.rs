//! The covering linear program shared by the lower bound and the LP-guided re-pack:
//! `min Σ price_t x_t  s.t.  Σ_t alloc_{t,r} x_t ≥ demand_r (every resource r), x ≥ 0`.
//!
//! Solved exactly by the dual simplex method on a tableau with one row per resource (a handful)
//! and one column per instance type. Every iterate of the dual simplex is dual feasible, and the
//! final dual vector is checked (and scaled down if rounding made it infeasible) before it is
//! used, so the bound is valid by weak duality whatever floating point did: for any integral
//! fleet `x`, `Σ price_t x_t ≥ Σ_t x_t Σ_r alloc_{t,r} y_r ≥ Σ_r demand_r y_r`.

/// One column of the covering problem: an instance type (of one NodePool) with its price and
/// what it holds of each resource.
#[derive(Clone, Debug, PartialEq)]
pub struct Column {
    /// USD per hour.
    pub price: f64,
    /// Amount of each resource (same order as the demand).
    pub alloc: Vec<f64>,
}

/// The optimum of the covering LP (a lower bound on any integral covering), or 0 when the
/// demand cannot be covered at all or the input is degenerate (negative or non-finite prices).
pub fn covering(columns: &[Column], demand: &[f64]) -> f64 {
    covering_with_duals(columns, demand).0
}

/// [`covering`] and the optimal dual prices: USD per hour per unit of each resource (same
/// order as `demand`; 0 for resources with no demand). `Σ demand_r × price_r` is the bound.
pub fn covering_with_duals(columns: &[Column], demand: &[f64]) -> (f64, Vec<f64>) {
    let rows: Vec<Row> = (0..demand.len())
        .map(|r| Row {
            resource: r,
            demand: demand[r],
            allowed: None,
        })
        .collect();
    let (lb, duals) = covering_rows(columns, &rows);
    let mut prices = vec![0.0; demand.len()];
    for (k, row) in rows.iter().enumerate() {
        if row.demand > 0.0 {
            prices[row.resource] = duals[k] / row.demand;
        }
    }
    (lb, prices)
}

/// One covering constraint: the columns in `allowed` (all when `None`) must together hold
/// `demand` of resource `resource`.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// Index into each column's `alloc`.
    pub resource: usize,
    /// Amount to cover.
    pub demand: f64,
    /// Which columns count for this row.
    pub allowed: Option<Vec<bool>>,
}

/// The covering LP with general rows: `min Σ price_j x_j` s.t. for every row,
/// `Σ_{j allowed} alloc_{j,resource} x_j ≥ demand`, `x ≥ 0`. Returns the optimum (0 when
/// degenerate or infeasible) and the dual of each row in the normalised problem (row demand
/// scaled to 1, so the bound is the sum of the duals).
pub fn covering_rows(columns: &[Column], all_rows: &[Row]) -> (f64, Vec<f64>) {
    let (lb, duals, _) = solve_rows(columns, all_rows);
    (lb, duals)
}

/// [`covering_with_duals`] plus the primal solution: how many of each column the fractional
/// optimum uses (all zero when the problem is degenerate).
pub fn covering_primal(columns: &[Column], demand: &[f64]) -> (f64, Vec<f64>) {
    let rows: Vec<Row> = (0..demand.len())
        .map(|r| Row {
            resource: r,
            demand: demand[r],
            allowed: None,
        })
        .collect();
    let (lb, _, x) = solve_rows(columns, &rows);
    (lb, x)
}

fn solve_rows(columns: &[Column], all_rows: &[Row]) -> (f64, Vec<f64>, Vec<f64>) {
    let zero = (0.0, vec![0.0; all_rows.len()], vec![0.0; columns.len()]);
    let rows: Vec<usize> = (0..all_rows.len())
        .filter(|&r| all_rows[r].demand > 0.0 && all_rows[r].demand.is_finite())
        .collect();
    if rows.is_empty() {
        return zero;
    }
    if columns
        .iter()
        .any(|c| !c.price.is_finite() || c.price < 0.0)
    {
        return zero;
    }
    let m = rows.len();
    let n = columns.len();
    // Normalised matrix: a[r][j] = alloc / demand, so that every demand is 1.
    let a: Vec<Vec<f64>> = rows
        .iter()
        .map(|&r| {
            let row = &all_rows[r];
            columns
                .iter()
                .enumerate()
                .map(|(j, c)| {
                    if row
                        .allowed
                        .as_ref()
                        .is_some_and(|al| !al.get(j).copied().unwrap_or(false))
                    {
                        return 0.0;
                    }
                    let v = c.alloc.get(row.resource).copied().unwrap_or(0.0);
                    if v.is_finite() && v > 0.0 {
                        // Cap at 1: for an integral fleet, one node holding the whole demand
                        // covers it alone, so the capped constraint stays valid.
                        (v / row.demand).min(1.0)
                    } else {
                        0.0
                    }
                })
                .collect()
        })
        .collect();
    if a.iter().any(|row| row.iter().all(|v| *v <= 0.0)) {
        return zero;
    }
    // Tableau of  -A x + s = -1, basis s; reduced costs d (x: price, s: 0).
    let width = n + m + 1;
    let mut t = vec![vec![0.0f64; width]; m];
    for r in 0..m {
        for j in 0..n {
            t[r][j] = -a[r][j];
        }
        t[r][n + r] = 1.0;
        t[r][width - 1] = -1.0;
    }
    let mut d = vec![0.0f64; width - 1];
    for j in 0..n {
        d[j] = columns[j].price;
    }
    const EPS: f64 = 1e-12;
    let mut basis: Vec<usize> = (0..m).map(|r| n + r).collect();
    for _ in 0..(50 * (m + n) + 100) {
        // Leaving row: most negative right-hand side.
        let mut leave = None;
        let mut most = -1e-9;
        for (r, row) in t.iter().enumerate() {
            if row[width - 1] < most {
                most = row[width - 1];
                leave = Some(r);
            }
        }
        let Some(r) = leave else { break };
        // Entering column: min ratio d_j / -t[r][j] over t[r][j] < 0 (smallest index on ties).
        let mut enter = None;
        let mut best = f64::INFINITY;
        for j in 0..width - 1 {
            if t[r][j] < -EPS {
                let ratio = d[j].max(0.0) / -t[r][j];
                if ratio < best - 1e-15 {
                    best = ratio;
                    enter = Some(j);
                }
            }
        }
        let Some(q) = enter else { break };
        basis[r] = q;
        let piv = t[r][q];
        for v in t[r].iter_mut() {
            *v /= piv;
        }
        let pivot_row = t[r].clone();
        for (k, row) in t.iter_mut().enumerate() {
            if k != r {
                let f = row[q];
                if f != 0.0 {
                    for (v, p) in row.iter_mut().zip(&pivot_row) {
                        *v -= f * p;
                    }
                }
            }
        }
        let f = d[q];
        if f != 0.0 {
            for (v, p) in d.iter_mut().zip(&pivot_row) {
                *v -= f * p;
            }
        }
    }
    // Duals are the reduced costs of the slack columns; make them provably feasible.
    let mut y: Vec<f64> = (0..m).map(|r| d[n + r].max(0.0)).collect();
    let mut scale: f64 = 1.0;
    for (j, c) in columns.iter().enumerate() {
        let s: f64 = (0..m).map(|r| a[r][j] * y[r]).sum();
        if s > 0.0 && s > c.price {
            scale = scale.min(c.price / s);
        }
    }
    for v in &mut y {
        *v *= scale;
    }
    let lb: f64 = y.iter().sum();
    let mut duals = vec![0.0; all_rows.len()];
    for (k, &r) in rows.iter().enumerate() {
        duals[r] = y[k];
    }
    let mut x = vec![0.0; n];
    for (r, &j) in basis.iter().enumerate() {
        if j < n {
            x[j] = t[r][width - 1].max(0.0);
        }
    }
    ((lb * (1.0 - 1e-9)).max(0.0), duals, x)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Exhaustive dual: every vertex of {A^T y ≤ c, y ≥ 0} (R active constraints), best value.
    fn brute(columns: &[Column], demand: &[f64]) -> f64 {
        let rows: Vec<usize> = (0..demand.len()).filter(|&r| demand[r] > 0.0).collect();
        let m = rows.len();
        // Constraints as (coefficients, rhs): columns then y_r ≥ 0 written as -y_r ≤ 0.
        let mut cons: Vec<(Vec<f64>, f64)> = columns
            .iter()
            .map(|c| {
                (
                    rows.iter()
                        .map(|&r| (c.alloc[r] / demand[r]).min(1.0))
                        .collect(),
                    c.price,
                )
            })
            .collect();
        for r in 0..m {
            let mut v = vec![0.0; m];
            v[r] = -1.0;
            cons.push((v, 0.0));
        }
        let k = cons.len();
        let mut best = 0.0f64;
        let mut idx: Vec<usize> = (0..m).collect();
        loop {
            // Solve the m×m system of the chosen constraints as equalities.
            let mut mat: Vec<Vec<f64>> = idx
                .iter()
                .map(|&i| {
                    let mut row = cons[i].0.clone();
                    row.push(cons[i].1);
                    row
                })
                .collect();
            let mut ok = true;
            for col in 0..m {
                let piv = (col..m).max_by(|&a, &b| mat[a][col].abs().total_cmp(&mat[b][col].abs()));
                let Some(piv) = piv else {
                    ok = false;
                    break;
                };
                if mat[piv][col].abs() < 1e-12 {
                    ok = false;
                    break;
                }
                mat.swap(col, piv);
                let p = mat[col][col];
                for v in mat[col].iter_mut() {
                    *v /= p;
                }
                for r in 0..m {
                    if r != col {
                        let f = mat[r][col];
                        let pr = mat[col].clone();
                        for (v, q) in mat[r].iter_mut().zip(&pr) {
                            *v -= f * q;
                        }
                    }
                }
            }
            if ok {
                let y: Vec<f64> = (0..m).map(|r| mat[r][m]).collect();
                let feasible = cons
                    .iter()
                    .all(|(a, c)| a.iter().zip(&y).map(|(x, y)| x * y).sum::<f64>() <= c + 1e-9);
                if feasible {
                    best = best.max(y.iter().sum());
                }
            }
            // Next combination.
            let mut i = m;
            loop {
                if i == 0 {
                    return best;
                }
                i -= 1;
                if idx[i] < k - m + i {
                    idx[i] += 1;
                    for j in i + 1..m {
                        idx[j] = idx[j - 1] + 1;
                    }
                    break;
                }
            }
        }
    }

    fn lcg(seed: &mut u64) -> f64 {
        *seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((*seed >> 11) as f64) / ((1u64 << 53) as f64)
    }

    #[test]
    fn matches_brute_force_on_random_instances() {
        let mut seed = 7u64;
        for case in 0..300 {
            let r = 1 + case % 3;
            let n = 1 + (case / 3) % 6;
            let demand: Vec<f64> = (0..r).map(|_| 1.0 + 20.0 * lcg(&mut seed)).collect();
            let columns: Vec<Column> = (0..n)
                .map(|_| Column {
                    price: 0.1 + 5.0 * lcg(&mut seed),
                    alloc: (0..r).map(|_| 0.5 + 10.0 * lcg(&mut seed)).collect(),
                })
                .collect();
            let lp = covering(&columns, &demand);
            let bf = brute(&columns, &demand);
            assert!(
                (lp - bf).abs() <= 1e-6 * bf.max(1.0),
                "case {case}: lp {lp} brute {bf} columns {columns:?} demand {demand:?}"
            );
        }
    }

    #[test]
    fn single_resource_is_price_per_unit_times_demand() {
        let columns = vec![
            Column {
                price: 1.0,
                alloc: vec![2.0],
            },
            Column {
                price: 3.0,
                alloc: vec![8.0],
            },
        ];
        // Best price per unit is 3/8; demand 16 → 6.
        let lb = covering(&columns, &[16.0]);
        assert!((lb - 6.0).abs() < 1e-6, "{lb}");
    }

    #[test]
    fn primal_solution_covers_the_demand_at_the_bound() {
        let mut seed = 11u64;
        for _ in 0..100 {
            let demand: Vec<f64> = (0..2).map(|_| 1.0 + 20.0 * lcg(&mut seed)).collect();
            let columns: Vec<Column> = (0..5)
                .map(|_| Column {
                    price: 0.1 + 5.0 * lcg(&mut seed),
                    alloc: (0..2).map(|_| 0.5 + 10.0 * lcg(&mut seed)).collect(),
                })
                .collect();
            let (lb, x) = covering_primal(&columns, &demand);
            let cost: f64 = x.iter().zip(&columns).map(|(x, c)| x * c.price).sum();
            assert!(
                (cost - lb).abs() <= 1e-6 * lb.max(1.0),
                "cost {cost} lb {lb}"
            );
            for (r, dem) in demand.iter().enumerate() {
                let held: f64 = x
                    .iter()
                    .zip(&columns)
                    .map(|(x, c)| x * c.alloc[r].min(*dem))
                    .sum();
                assert!(held >= dem * (1.0 - 1e-6), "row {r}: {held} < {dem}");
            }
        }
    }

    #[test]
    fn degenerate_inputs_give_zero() {
        let columns = vec![Column {
            price: f64::NAN,
            alloc: vec![1.0],
        }];
        assert_eq!(covering(&columns, &[1.0]), 0.0);
        assert_eq!(covering(&[], &[1.0]), 0.0);
        let ok = vec![Column {
            price: 1.0,
            alloc: vec![1.0],
        }];
        assert_eq!(covering(&ok, &[0.0]), 0.0);
    }
}
