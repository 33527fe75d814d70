"""Where a run's envs come from: gymnasium ids, classes and factories made into vector
envs (make.py, with the table from vector_mode to backend), the backends beyond
gymnasium's own (thread_vec.py, async_vec.py, envpool_vec.py), a user's env errors as one
line (errors.py) and the memory tasks (memory_tasks.py). It imports nothing else of distrl:
adding a backend touches make.py's table and the backend's own file."""
