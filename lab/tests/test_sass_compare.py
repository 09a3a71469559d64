"""lab/sass_compare.py on listings in nvdisasm's format: label numbering is not a change, a consistent renaming of
registers is told apart, and any other change (a planted one) is caught."""
from lab import sass_compare

LISTING = """\
	.section	.text.{name},"ax",@progbits
.text.{name}:
        /*0000*/                   LDC R1, c[0x0][0x28] ;
        /*0010*/                   ISETP.GE.AND P0, PT, R4, 0x80, PT ;
        /*0020*/              @!P0 BRA `(.L_x_{label}) ;
        /*0030*/                   HGMMA.SP.64x16x32.F32 R24, gdesc[UR20], R24, R32, 0x0 ;
.L_x_{label}:
        /*0040*/                   EXIT ;
"""


def _listing(name="k", label=7, **changes):
    text = LISTING.format(name=name, label=label)
    for old, new in changes.items():
        text = text.replace(old, new)
    return sass_compare.function_listings(text)


def test_label_numbers_and_addresses_are_not_changes():
    before = {**_listing("a", 7), **_listing("b", 9)}
    after = {**_listing("a", 1650), **_listing("b", 3)}
    assert before["a"] == after["a"] and len(before["a"]) == 5 and "/*" not in before["a"][0]
    assert sass_compare.compare(before, after)["identical"] == ["a", "b"]


def test_registers_renamed_consistently_are_told_apart_from_a_change():
    before = _listing()
    renamed = _listing(R32="R40", R24="R26")
    verdicts = sass_compare.compare(before, renamed)
    assert verdicts["renamed"] == ["k"] and not verdicts["identical"]
    # planted faults: one operand renamed in one place only, an instruction changed, a function gone
    assert sass_compare.compare(before, _listing(**{"R24, gdesc": "R26, gdesc"}))["differs"] == ["k"]
    assert sass_compare.compare(before, _listing(**{"0x80": "0x40"}))["differs"] == ["k"]
    assert sass_compare.compare(before, _listing("other"))["missing"] == ["k"]


def test_a_prefix_limits_what_is_compared():
    before = {**_listing("wgmma_sp_f16_a"), **_listing("wgmma_sp_e4m3_a")}
    after = _listing("wgmma_sp_f16_a")
    verdicts = sass_compare.compare(before, after, "wgmma_sp_f16_")
    assert verdicts == {"identical": ["wgmma_sp_f16_a"], "renamed": [], "differs": [], "missing": []}
