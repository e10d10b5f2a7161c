//! The seeds' op names (`ops::legacy`) on buffers, on the CPU: values against hand-computed
//! results, the `n` prefix honoured, and misuse reported as errors.

use hologram_core::ops::legacy::{activation, linalg, loss, math, memory, reduce};
use hologram_core::{Error, Executor};

fn close(got: &[f32], want: &[f32]) {
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(want) {
        assert!(
            (g - w).abs() <= 1e-6 * w.abs().max(1.0),
            "{got:?} vs {want:?}"
        );
    }
}

#[test]
fn math_activation_and_memory_ops_write_the_first_n_elements() -> Result<(), Error> {
    let exec = Executor::cpu();
    let a = exec.from_slice(&[1.0f32, -2.0, 3.0, -4.0])?;
    let b = exec.from_slice(&[0.5f32, 0.5, 2.0, 9.0])?;
    let c = exec.from_slice(&[7.0f32; 4])?;
    math::vector_add(&exec, &a, &b, &c, 3)?;
    close(&c.to_vec()?, &[1.5, -1.5, 5.0, 7.0]); // the fourth element is untouched
    math::vector_div(&exec, &a, &b, &c, 4)?;
    close(&c.to_vec()?, &[2.0, -4.0, 1.5, -4.0 / 9.0]);
    math::max(&exec, &a, &b, &c, 4)?;
    close(&c.to_vec()?, &[1.0, 0.5, 3.0, 9.0]);
    math::relu(&exec, &a, &c, 4)?;
    close(&c.to_vec()?, &[1.0, 0.0, 3.0, 0.0]);
    math::clip(&exec, &a, &c, -1.0, 2.0, 4)?;
    close(&c.to_vec()?, &[1.0, -1.0, 2.0, -1.0]);
    math::scalar_mul(&exec, &a, -2.0, &c, 4)?;
    close(&c.to_vec()?, &[-2.0, 4.0, -6.0, 8.0]);
    activation::sigmoid(&exec, &a, &c, 4)?;
    let sig: Vec<f32> = [1.0f32, -2.0, 3.0, -4.0]
        .iter()
        .map(|x| 1.0 / (1.0 + (-x).exp()))
        .collect();
    close(&c.to_vec()?, &sig);
    activation::softmax(&exec, &a, &c, 2)?;
    let e = (-3.0f32).exp();
    close(&c.to_vec()?[..2], &[1.0 / (1.0 + e), e / (1.0 + e)]);
    memory::fill(&exec, &c, 0.25, 4)?;
    close(&c.to_vec()?, &[0.25; 4]);
    memory::copy(&exec, &a, &c, 2)?;
    close(&c.to_vec()?, &[1.0, -2.0, 0.25, 0.25]);
    Ok(())
}

#[test]
fn reductions_losses_and_products_return_and_store_their_value() -> Result<(), Error> {
    let exec = Executor::cpu();
    let a = exec.from_slice(&[1.0f32, -2.0, 3.0, -4.0])?;
    let b = exec.from_slice(&[0.5f32, 0.5, 2.0, 9.0])?;
    let out = exec.zeros::<f32>(1)?;
    assert_eq!(reduce::sum(&exec, &a, &out, 3)?, 2.0);
    close(&out.to_vec()?, &[2.0]);
    assert_eq!(reduce::min(&exec, &a, &out, 4)?, -4.0);
    let mse = loss::mse(&exec, &a, &b, &out, 4)?;
    let want = (0.25 + 6.25 + 1.0 + 169.0) / 4.0;
    assert!((mse - want).abs() < 1e-6, "{mse} vs {want}");
    close(&out.to_vec()?, &[want as f32]);
    let p = exec.from_slice(&[0.9f32, 0.2])?;
    let t = exec.from_slice(&[1.0f32, 0.0])?;
    let bce = loss::binary_cross_entropy(&exec, &p, &t, &out, 2)?;
    let want = -(0.9f64.ln() + 0.8f64.ln()) / 2.0;
    assert!((bce - want).abs() < 1e-6, "{bce} vs {want}");
    // 2x2 · 2x2 and 2x2 · 2
    let m = exec.from_slice(&[1.0f32, 2.0, 3.0, 4.0])?;
    let c = exec.zeros::<f32>(4)?;
    linalg::gemm(&exec, &m, &m, &c, 2, 2, 2)?;
    close(&c.to_vec()?, &[7.0, 10.0, 15.0, 22.0]);
    let y = exec.zeros::<f32>(2)?;
    linalg::matvec(&exec, &m, &b, &y, 2, 2)?;
    close(&y.to_vec()?, &[1.5, 3.5]);
    Ok(())
}

#[test]
fn misuse_is_an_error() -> Result<(), Error> {
    let exec = Executor::cpu();
    let a = exec.from_slice(&[1.0f32, 2.0])?;
    let c = exec.zeros::<f32>(2)?;
    assert!(matches!(
        math::vector_add(&exec, &a, &a, &c, 3),
        Err(Error::LengthMismatch(_))
    ));
    let other = Executor::cpu();
    let foreign = other.zeros::<f32>(2)?;
    assert!(matches!(
        math::vector_add(&exec, &a, &a, &foreign, 2),
        Err(Error::DeviceMismatch(_))
    ));
    Ok(())
}
