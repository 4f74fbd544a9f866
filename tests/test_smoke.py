import splitnet as sn


def test_registry_names():
    want = {"lie-trotter", "strang", "yoshida4", "suzuki4", "yoshida6", "yoshida8", "blanes-moan4"}
    assert want <= set(sn.schemes.available())
