import os
import sys

# The package under test is this clone's, whatever else is installed.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
