"""Reading the CSV files an instructor hands in (roster, extensions, submission times)."""
import csv
from pathlib import Path


def read_csv(path, what, lower=False):
    """(header, csv.DictReader) of an instructor's CSV file (UTF-8, a spreadsheet's BOM
    allowed), the column names stripped (and lowercased with lower); SystemExit with the
    reason when the file cannot be read. what: the file's kind, for the message."""
    path = Path(path)
    if not path.is_file():
        raise SystemExit(f"no such file: {path}")
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError:
        raise SystemExit(f"{path} is not UTF-8 text: save the {what} as CSV (UTF-8)")
    reader = csv.DictReader(text.splitlines())
    header = [h.strip().lower() if lower else h.strip() for h in reader.fieldnames or []]
    reader.fieldnames = header
    return header, reader
