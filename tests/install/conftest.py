"""Fixtures of the install tests: the student bundle, built once per session."""
import pytest


@pytest.fixture(scope="session")
def student_bundle(tmp_path_factory):
    """The student bundle (make student-bundle), built once (about 10 s of CPU) for
    tests/install/test_bundle.py and tests/install/test_student_install.py, which share its
    xdist_group ("bundle"): (the bundle's folder, the student package's wheel in it, the
    wheel unpacked, the progress lines the build printed)."""
    import zipfile

    from grader.instructor import bundle

    lines = []
    built = bundle.build(tmp_path_factory.mktemp("dist") / "self-attention-student", progress=lines.append)
    wheel = next(built.glob("*.whl"))
    unpacked = tmp_path_factory.mktemp("wheel")
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(unpacked)
    return built, wheel, unpacked, lines
