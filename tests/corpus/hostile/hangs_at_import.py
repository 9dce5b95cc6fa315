# A submission that never finishes importing.
import time

while True:
    time.sleep(1)
