"""PySpark report jobs over the message tables and the archive.

Pure PySpark: nothing here imports Django, so the jobs run unchanged on any Spark cluster.
Extract (`extract`), transform (`transform`, pure DataFrame functions) and load (`load`,
plain Python results) are kept apart; `jobs` wires them together.
"""
