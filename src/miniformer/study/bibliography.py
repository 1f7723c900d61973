"""The papers the study's claims and variants rest on: one list the report's References section and the README share.

A claim's ``source`` starts with a key of this list ("Press 2022 App. T2" cites ``Press 2022``, its appendix table
T2), or is no paper at all ("first principles"); a test keeps every claim's key in the list and every entry in the
README.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Reference:
    authors: str
    year: int
    title: str
    where: str  # arXiv id, or where it appeared

    def __str__(self) -> str:
        return f"{self.authors} ({self.year}). {self.title}. {self.where}."


REFERENCES: dict[str, Reference] = {
    "Vaswani 2017": Reference("Vaswani, Shazeer, Parmar, Uszkoreit, Jones, Gomez, Kaiser, Polosukhin", 2017,
                              "Attention Is All You Need", "NeurIPS 2017, arXiv:1706.03762"),
    "Press 2022": Reference("Press, Smith, Lewis", 2022, "Train Short, Test Long: Attention with Linear Biases "
                            "Enables Input Length Extrapolation", "ICLR 2022, arXiv:2108.12409"),
    "Haviv 2022": Reference("Haviv, Ram, Press, Izsak, Levy", 2022, "Transformer Language Models without Positional "
                            "Encodings Still Learn Positional Information", "Findings of EMNLP 2022, arXiv:2203.16634"),
    "Raffel 2020": Reference("Raffel, Shazeer, Roberts, Lee, Narang, Matena, Zhou, Li, Liu", 2020, "Exploring the "
                             "Limits of Transfer Learning with a Unified Text-to-Text Transformer",
                             "JMLR 21(140), arXiv:1910.10683"),
    "Xiong 2020": Reference("Xiong, Yang, He, Zheng, Zheng, Xing, Zhang, Lan, Wang, Liu", 2020, "On Layer "
                            "Normalization in the Transformer Architecture", "ICML 2020, arXiv:2002.04745"),
    "Dong 2021": Reference("Dong, Cordonnier, Loukas", 2021, "Attention is Not All You Need: Pure Attention Loses "
                           "Rank Doubly Exponentially with Depth", "ICML 2021, arXiv:2103.03404"),
    "Hägele 2024": Reference("Hägele, Bakouch, Kosson, Ben Allal, Von Werra, Jaggi", 2024, "Scaling Laws and "
                             "Compute-Optimal Training Beyond Fixed Training Durations",
                             "NeurIPS 2024, arXiv:2405.18392"),
    "Zhai 2023": Reference("Zhai, Likhomanenko, Littwin, Busbridge, Ramapuram, Zhang, Gu, Susskind", 2023,
                           "Stabilizing Transformer Training by Preventing Attention Entropy Collapse",
                           "ICML 2023, arXiv:2303.06296"),
    "Su 2021": Reference("Su, Lu, Pan, Murtadha, Wen, Liu", 2021, "RoFormer: Enhanced Transformer with Rotary "
                         "Position Embedding", "arXiv:2104.09864"),
    "Devlin 2019": Reference("Devlin, Chang, Lee, Toutanova", 2019, "BERT: Pre-training of Deep Bidirectional "
                             "Transformers for Language Understanding", "NAACL 2019, arXiv:1810.04805"),
    "Nguyen & Salazar 2019": Reference("Nguyen, Salazar", 2019, "Transformers without Tears: Improving the "
                                       "Normalization of Self-Attention", "IWSLT 2019, arXiv:1910.05895"),
    "Zhang & Sennrich 2019": Reference("Zhang, Sennrich", 2019, "Root Mean Square Layer Normalization",
                                       "NeurIPS 2019, arXiv:1910.07467"),
    "Radford 2019": Reference("Radford, Wu, Child, Luan, Amodei, Sutskever", 2019, "Language Models are "
                              "Unsupervised Multitask Learners", "OpenAI technical report (GPT-2)"),
}


def key_of(source: str) -> str | None:
    """The reference a claim's source cites: its words up to the year ("Press 2022 App. T2" -> "Press 2022",
    "Nguyen & Salazar 2019" -> itself); None for a source that is no paper ("first principles")."""
    words = source.split()
    years = [i for i, w in enumerate(words) if w.isdigit() and len(w) == 4]
    return " ".join(words[: years[0] + 1]) if years else None

