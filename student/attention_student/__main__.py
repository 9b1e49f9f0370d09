"""python -m attention_student [FOLDER] [--no-browser] [--port N] [-- JUPYTER LAB OPTIONS]"""
import sys

from attention_student.launch import main

sys.exit(main())
