//! gather, index_select, scatter and scatter_add against host references, on every backend of
//! `HOLOGRAM_TEST_BACKENDS` (and the CPU), with strided operands and out-of-range indexes.

mod common;

use hologram_core::{DType, Tensor};

fn f32s(t: &Tensor) -> Vec<f32> {
    t.cast(DType::F32).unwrap().to_vec::<f32>().unwrap()
}

#[test]
fn gather_and_index_select_pick_elements() {
    for exec in common::executors() {
        // x: 3x4, gather along axis 1 with a 3x2 index (i64), and along axis 0.
        let x: Vec<f32> = (0..12).map(|i| i as f32 * 1.5).collect();
        let xt = Tensor::from_slice(&exec, &x, &[3, 4]).unwrap();
        let idx = Tensor::from_slice(&exec, &[3i64, 0, 1, 1, 2, 3], &[3, 2]).unwrap();
        let g = xt.gather(1, &idx).unwrap();
        assert_eq!(g.shape(), &[3, 2]);
        assert_eq!(
            f32s(&g),
            vec![x[3], x[0], x[5], x[5], x[10], x[11]],
            "{exec:?}"
        );
        let idx0 = Tensor::from_slice(&exec, &[2i32, 0, 1, 2], &[1, 4]).unwrap();
        assert_eq!(
            f32s(&xt.gather(0, &idx0).unwrap()),
            vec![x[8], x[1], x[6], x[11]]
        );
        // A transposed source and a broadcast index.
        let xt_t = xt.transpose(0, 1).unwrap(); // 4x3
        let col = Tensor::from_slice(&exec, &[2i64, 0, 1, 2], &[4, 1]).unwrap();
        let got = f32s(&xt_t.gather(1, &col).unwrap());
        assert_eq!(
            got,
            vec![x[8], x[1], x[6], x[11]],
            "{exec:?}: strided source"
        );
        // Embedding lookup: rows of a 5x3 table.
        let table: Vec<f32> = (0..15).map(|i| i as f32).collect();
        let tt = Tensor::from_slice(&exec, &table, &[5, 3]).unwrap();
        let ids = Tensor::from_slice(&exec, &[4i64, 0, 4, 2], &[4]).unwrap();
        let rows = tt.index_select(0, &ids).unwrap();
        assert_eq!(rows.shape(), &[4, 3]);
        assert_eq!(
            f32s(&rows),
            vec![12., 13., 14., 0., 1., 2., 12., 13., 14., 6., 7., 8.]
        );
        // Out-of-range indexes are errors, not wrong elements.
        for bad in [4i64, -1] {
            let b = Tensor::from_slice(&exec, &[0i64, bad], &[1, 2]).unwrap();
            let e = xt.gather(1, &b).and_then(|t| t.to_bytes()).unwrap_err();
            assert!(e.to_string().contains("out-of-bounds"), "{exec:?}: {e}");
        }
    }
}

#[test]
fn scatter_and_scatter_add_write_elements() {
    for exec in common::executors() {
        let zeros = Tensor::zeros(&exec, &[3, 4], DType::F32).unwrap();
        let idx = Tensor::from_slice(&exec, &[1i64, 3, 0, 0, 2, 1], &[3, 2]).unwrap();
        let src = Tensor::from_slice(&exec, &[1.0f32, 2., 3., 4., 5., 6.], &[3, 2]).unwrap();
        let s = zeros.scatter(
            1,
            &idx,
            &Tensor::full(&exec, &[1], -1.0, DType::F32).unwrap(),
        );
        let s = f32s(&s.unwrap());
        assert_eq!(
            s,
            vec![0., -1., 0., -1., -1., 0., 0., 0., 0., -1., -1., 0.],
            "{exec:?}"
        );
        // Duplicate indexes add up.
        let a = f32s(&zeros.scatter_add(1, &idx, &src).unwrap());
        assert_eq!(
            a,
            vec![0., 1., 0., 2., 7., 0., 0., 0., 0., 6., 5., 0.],
            "{exec:?}"
        );
        // The source tensor is unchanged (scatter returns a copy).
        assert_eq!(f32s(&zeros), vec![0.0; 12]);
        // Embedding backward: rows of gradients added into a table.
        let table = Tensor::zeros(&exec, &[4, 2], DType::F32).unwrap();
        let ids = Tensor::from_slice(&exec, &[3i64, 1, 3], &[3, 1])
            .unwrap()
            .expand(&[3, 2])
            .unwrap();
        let grads = Tensor::from_slice(&exec, &[1.0f32, 2., 3., 4., 5., 6.], &[3, 2]).unwrap();
        let t = f32s(&table.scatter_add(0, &ids, &grads).unwrap());
        assert_eq!(t, vec![0., 0., 3., 4., 0., 0., 6., 8.], "{exec:?}");
        let e = zeros
            .scatter_add(
                1,
                &Tensor::from_slice(&exec, &[7i64], &[1, 1]).unwrap(),
                &src,
            )
            .and_then(|t| t.to_bytes())
            .unwrap_err();
        assert!(e.to_string().contains("out-of-bounds"), "{exec:?}: {e}");
    }
}
