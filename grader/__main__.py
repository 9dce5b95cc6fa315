import sys

from grader.faces.cli import main

sys.exit(main())
