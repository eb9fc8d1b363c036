import ItsMeCore
