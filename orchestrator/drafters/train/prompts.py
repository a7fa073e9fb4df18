"""Training prompts for demo drafters, generated from templates. Disjoint from the `smoke` dataset and the
benchmark datasets used for evaluation (checked in `training_prompts`). Deterministic for a seed."""

from __future__ import annotations

import random

TOPICS = ["photosynthesis", "the water cycle", "black holes", "compound interest", "the immune system", "volcanoes",
          "machine learning", "the French Revolution", "plate tectonics", "vaccines", "inflation", "gravity",
          "the internet", "climate change", "the printing press", "electric cars", "the human heart", "bees",
          "recycling", "solar panels", "the Roman Empire", "DNA", "earthquakes", "tides", "rainbows", "coffee",
          "sleep", "memory", "chess", "jazz", "the moon landing", "antibiotics", "glaciers", "batteries", "bridges",
          "democracy", "supply and demand", "the stock market", "oceans", "deserts", "language learning",
          "time zones", "elections", "nuclear power", "wind turbines", "bread making", "friendship", "exercise"]
AUDIENCES = ["a child", "a high-school student", "a busy manager", "a beginner", "an expert", "a grandparent"]
CODE_TASKS = ["reverses a linked list", "counts the vowels in a string", "merges two sorted lists",
              "computes the greatest common divisor of two numbers", "checks whether a number is prime",
              "flattens a nested list", "returns the most common word in a text", "converts Celsius to Fahrenheit",
              "removes whitespace from both ends of every line", "finds the second largest number in a list",
              "validates an email address with a regular expression", "computes a running average",
              "groups words by their first letter", "rotates a matrix by 90 degrees", "parses a CSV line",
              "computes the factorial of n iteratively", "checks whether two strings are anagrams",
              "returns the indices of two numbers that add up to a target", "implements binary search",
              "counts the words in a file", "transposes a matrix", "generates the first n prime numbers",
              "capitalises the first letter of every word", "sums the digits of an integer"]
LANGS = ["Python", "JavaScript", "Go", "Rust", "Java", "C"]
ITEMS = ["apples", "books", "pencils", "tickets", "cookies", "marbles", "stamps", "shirts"]
NAMES = ["Ana", "Ben", "Chloe", "Dev", "Elif", "Farah", "Goran", "Hana", "Ivo", "Jun"]
SENTENCES = ["the meeting was moved to thursday because the room was double booked",
             "our team shipped the new feature two weeks late but users love it",
             "i think we should reconsider the budget before we hire anyone else",
             "the train was delayed so i missed the first half of the concert",
             "please send me the report by friday so i can review it over the weekend",
             "the new cafe downtown has great coffee but the chairs are uncomfortable",
             "he forgot his umbrella and got completely soaked on the way home",
             "we need more volunteers for the charity run next month"]
LIST_KINDS = ["tips for staying focused", "ways to save money", "healthy breakfast ideas", "questions to ask in an "
              "interview", "reasons to learn a second language", "things to pack for a camping trip",
              "habits of good programmers", "ideas for a rainy afternoon", "ways to reduce plastic waste"]


def _templates(rng: random.Random) -> list[str]:
    t = rng.choice(TOPICS)
    a = rng.choice(AUDIENCES)
    n1, n2, n3 = rng.randint(3, 60), rng.randint(2, 12), rng.randint(2, 9)
    who, item = rng.choice(NAMES), rng.choice(ITEMS)
    return [
        f"Explain {t} to {a} in a short paragraph.",
        f"Write a {rng.choice(LANGS)} function that {rng.choice(CODE_TASKS)}.",
        f"{who} has {n1} {item} and buys {n2} bags with {n3} {item} each. How many {item} does {who} have now? "
        f"Show your reasoning.",
        f"A shop sells {item} at {n3} dollars each. How much do {n1} {item} cost, and how much change is left "
        f"from {n1 * n3 + n2 * 5} dollars?",
        f"Rewrite this sentence with correct capitalisation and punctuation: {rng.choice(SENTENCES)}",
        f"Give me {rng.randint(3, 6)} {rng.choice(LIST_KINDS)}.",
        f"Write a short poem about {t}.",
        f"Compare {t} and {rng.choice(TOPICS)} in three sentences.",
        f"What are the main advantages and disadvantages of {t}?",
        f"Summarise the idea of {t} in one sentence, then give an example.",
        f"Write a {rng.choice(LANGS)} program that prints the numbers from 1 to {n1}, one per line.",
        f"What is {n1} times {n2}, plus {n3}? Answer step by step.",
        f"Translate into simple English for {a}: {rng.choice(SENTENCES)}.",
        f"Write an email to {who} asking to reschedule our call about {t}.",
    ]


def training_prompts(n: int, seed: int = 0) -> list[str]:
    """`n` distinct prompts, none equal to an evaluation prompt."""
    from ...datasets import load_prompts

    held_out = {p.messages[-1]["content"].strip() for p in load_prompts("smoke", num_prompts=1000)}
    rng = random.Random(seed)
    out: list[str] = []
    seen: set[str] = set()
    tries = 0
    while len(out) < n and tries < 50 * n:
        tries += 1
        p = rng.choice(_templates(rng))
        if p not in seen and p.strip() not in held_out:
            seen.add(p)
            out.append(p)
    return out
