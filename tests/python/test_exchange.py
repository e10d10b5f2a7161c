"""hologram.Exchange: tensors to and from PyTorch through DLPack's C exchange table."""

import pytest

torch = pytest.importorskip("torch")

import hologram as hg  # noqa: E402

TABLE = getattr(torch.Tensor, "__dlpack_c_exchange_api__", None)
pytestmark = pytest.mark.skipif(TABLE is None, reason="this torch has no DLPack C exchange table")


def exchange(params=None):
    return hg.Exchange(hg.executor_for("cpu"), TABLE, params)


def test_import_and_export_share_memory_both_ways():
    ex = exchange()
    x = torch.arange(6.0).reshape(2, 3)
    (h,) = ex.import_all([x])
    assert h.shape == (2, 3) and h.tolist() == x.tolist()
    x[0, 0] = 42.0  # the import is a view of torch's memory
    assert h.tolist()[0][0] == 42.0
    (back,) = ex.export_all([h])
    assert back.data_ptr() == x.data_ptr() and back.shape == (2, 3)
    (doubled,) = ex.export_all([h * 2])
    assert doubled.tolist() == (x * 2).tolist()


def test_views_keep_their_strides_and_offsets():
    ex = exchange()
    base = torch.arange(24.0).reshape(4, 6)
    view = base[1:, ::2].t()
    (h,) = ex.import_all([view])
    assert h.tolist() == view.tolist()
    (back,) = ex.export_all([h])
    assert back.stride() == view.stride() and back.data_ptr() == view.data_ptr()


def test_tensors_that_require_grad_are_imported_without_detaching():
    ex = exchange()
    p = torch.nn.Parameter(torch.randn(3, 4))
    (h,) = ex.import_all([p])
    assert h.tolist() == p.detach().tolist()


def test_parameter_views_are_kept_until_the_parameter_moves():
    ex = exchange([True, False])
    p = torch.nn.Parameter(torch.randn(3, 4))
    x = torch.randn(3, 4)
    a, _ = ex.import_all([p, x])
    with torch.no_grad():
        p.mul_(2)  # in place: the kept view sees it
    b, _ = ex.import_all([p, x])
    assert ex.export_all([b])[0].data_ptr() == ex.export_all([a])[0].data_ptr() == p.data_ptr()
    assert b.tolist() == p.detach().tolist()
    p.data = torch.randn(4, 3)  # new memory and shape: imported again
    c, _ = ex.import_all([p, x])
    assert c.shape == (4, 3) and c.tolist() == p.detach().tolist()


def test_run_first_replays_the_first_plan_that_accepts_the_inputs():
    ex = exchange()
    x4 = torch.arange(4.0)
    x3 = torch.arange(3.0)
    plan4, _ = hg.record(lambda t: [(t * 2 + 1).relu()], ex.import_all([x4])[0])
    plan3, _ = hg.record(lambda t: [t - 1], ex.import_all([x3])[0])
    k, (out,) = ex.run_first([plan4, plan3], [x3], [False])
    assert k == 1 and out.tolist() == [-1.0, 0.0, 1.0]
    k, (out,) = ex.run_first([plan4, plan3], [x4 - 2], [False])
    assert k == 0 and out.tolist() == [0.0, 0.0, 1.0, 3.0]
    assert ex.run_first([plan4], [torch.arange(5.0)], [False]) is None


def test_run_first_skips_a_plan_whose_aliased_outputs_are_held():
    ex = exchange()
    x = torch.arange(4.0)
    first, _ = hg.record(lambda t: [t + 1], ex.import_all([x])[0])
    second, _ = hg.record(lambda t: [t + 1], ex.import_all([x])[0])
    k, (held,) = ex.run_first([first, second], [x], [True])
    assert k == 0
    k, (other,) = ex.run_first([first, second], [x * 10], [True])
    assert k == 1 and held.tolist() == [1.0, 2.0, 3.0, 4.0] and other.tolist() == [1.0, 11.0, 21.0, 31.0]
    assert ex.run_first([first, second], [x], [True]) is None
    del held
    assert ex.run_first([first, second], [x], [True])[0] == 0


def test_a_capsule_that_is_not_an_exchange_table_is_refused():
    with pytest.raises(hg.ValidationError, match="dlpack_exchange_api"):
        hg.Exchange(hg.executor_for("cpu"), torch.arange(3.0).__dlpack__())
