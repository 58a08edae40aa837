import math
from dvclive import Live
with Live(save_dvc_exp=False) as live:
    live.log_params({'lr': 0.05, 'model': {'layers': 2, 'act': 'relu'}})
    for i in range(12):
        live.log_metric('train/loss', 1.0 / (i + 1), timestamp=True)
        live.log_metric('val/acc', float('nan') if i == 1 else min(1.0, 0.1 * i), timestamp=True)
        live.log_metric('train/lr', 0.05 * 0.5 ** i, timestamp=True)
        live.next_step()
    live.summary['best/acc'] = 0.6
