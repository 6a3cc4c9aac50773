# 根据需要import包
import torch
from module import ModuleOP

# 导入工具的数据采集接口
from parity import PrecisionDebugger

# 将PrecisionDebugger的实例化放在文件的开始位置，即导包后的位置，确保所有API都被封装
debugger = PrecisionDebugger(config_path='./config.json')

if __name__ == "__main__":
    module = ModuleOP()

    x = torch.randn(10, 8)
    out = module(x)
    loss = out.sum()
    loss.backward()
