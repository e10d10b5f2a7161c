//! Parallel assignment (`Tensor::assign_all`): every destination gets the value computed from
//! the old values, whether it is written in place or through a temporary, and an optimizer-like
//! update runs as one kernel writing every destination (no copies). Runs on every backend of
//! `HOLOGRAM_TEST_BACKENDS` (and the CPU).

mod common;

use hologram_core::{Executor, Tensor};

fn t(exec: &Executor, v: &[f32], shape: &[usize]) -> Tensor {
    Tensor::from_slice(exec, v, shape).unwrap()
}

fn vals(t: &Tensor) -> Vec<f32> {
    t.to_vec::<f32>().unwrap()
}

fn close(got: &[f32], want: &[f32], what: &str) {
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= 1e-5 * w.abs().max(1.0),
            "{what}[{i}]: got {g}, want {w}"
        );
    }
}

#[test]
fn adam_like_update_writes_in_place_from_old_values() {
    for exec in common::executors() {
        let n = 1000;
        let p0: Vec<f32> = (0..n).map(|i| (i as f32 * 0.37).sin()).collect();
        let g0: Vec<f32> = (0..n).map(|i| (i as f32 * 0.11).cos()).collect();
        let m0: Vec<f32> = (0..n).map(|i| 0.01 * i as f32 / n as f32).collect();
        let v0: Vec<f32> = (0..n).map(|i| 0.5 + i as f32 / n as f32).collect();
        let (p, g, m, v) = (
            t(&exec, &p0, &[10, 100]),
            t(&exec, &g0, &[10, 100]),
            t(&exec, &m0, &[10, 100]),
            t(&exec, &v0, &[10, 100]),
        );
        // m' = 0.9 m + 0.1 g; v' = 0.99 v + 0.01 g²; p' = p - 0.1 m' / (sqrt(v') + 1e-8)
        let m_new = m.mul(0.9).unwrap().add(&g.mul(0.1).unwrap()).unwrap();
        let v_new = v
            .mul(0.99)
            .unwrap()
            .add(&g.mul(&g).unwrap().mul(0.01).unwrap())
            .unwrap();
        let p_new = p
            .sub(
                &m_new
                    .mul(0.1)
                    .unwrap()
                    .div(&v_new.sqrt().unwrap().add(1e-8).unwrap())
                    .unwrap(),
            )
            .unwrap();
        let before = exec.launch_count();
        // Listed in the order that would go wrong if written one by one in place.
        Tensor::assign_all(&[(m_new, m.clone()), (v_new, v.clone()), (p_new, p.clone())]).unwrap();
        // One kernel for all three destinations: every lane reads the old p, m and v at its
        // element before writing the new ones there.
        assert_eq!(exec.launch_count() - before, 1, "{}", exec.backend_type());
        let (mut pw, mut mw, mut vw) = (Vec::new(), Vec::new(), Vec::new());
        for i in 0..n {
            let mi = 0.9 * m0[i] + 0.1 * g0[i];
            let vi = 0.99 * v0[i] + 0.01 * (g0[i] * g0[i]);
            mw.push(mi);
            vw.push(vi);
            pw.push(p0[i] - (mi * 0.1) / (vi.sqrt() + 1e-8));
        }
        close(&vals(&m), &mw, "m");
        close(&vals(&v), &vw, "v");
        close(&vals(&p), &pw, "p");
    }
}

#[test]
fn swaps_and_cross_reads_go_through_temporaries() {
    for exec in common::executors() {
        let a = t(&exec, &[1.0, 2.0, 3.0], &[3]);
        let b = t(&exec, &[10.0, 20.0, 30.0], &[3]);
        let c = t(&exec, &[5.0, 6.0, 7.0], &[3]);
        // a, b = b, a (stored values: a cycle), and c = c + a (reads a destination written
        // in the same assignment: must see the old a).
        Tensor::assign_all(&[
            (b.clone(), a.clone()),
            (a.clone(), b.clone()),
            (c.add(&a).unwrap(), c.clone()),
        ])
        .unwrap();
        assert_eq!(vals(&a), vec![10.0, 20.0, 30.0]);
        assert_eq!(vals(&b), vec![1.0, 2.0, 3.0]);
        assert_eq!(vals(&c), vec![6.0, 8.0, 10.0]);
    }
}

#[test]
fn a_value_reading_its_destination_elsewhere_is_not_written_in_place() {
    for exec in common::executors() {
        let x = t(&exec, &[1.0, 2.0, 3.0, 4.0], &[2, 2]);
        // x = x + xᵀ reads x at other elements than it writes; x = x itself is left alone.
        let y = x.add(&x.transpose(0, 1).unwrap()).unwrap();
        Tensor::assign_all(&[(y, x.clone()), (x.clone(), x.clone())]).unwrap();
        assert_eq!(vals(&x), vec![2.0, 5.0, 5.0, 8.0]);
    }
}
